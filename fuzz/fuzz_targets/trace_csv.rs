//! libFuzzer entry for [`kairos_fuzz::trace_csv`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kairos_fuzz::trace_csv(data));

//! libFuzzer entry for [`kairos_fuzz::report_split`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kairos_fuzz::report_split(data));

//! libFuzzer entry for [`kairos_fuzz::report_ingest`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kairos_fuzz::report_ingest(data));

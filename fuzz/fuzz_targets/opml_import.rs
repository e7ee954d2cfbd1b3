//! libFuzzer entry for [`kairos_fuzz::opml_import`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kairos_fuzz::opml_import(data));

//! libFuzzer entry for [`kairos_fuzz::feed_items`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kairos_fuzz::feed_items(data));

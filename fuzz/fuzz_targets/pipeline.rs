//! libFuzzer target: bytes -> parse -> check -> pretty -> lower -> bounded search -> replay ->
//! CUDA for both backends (`phasecheck_gpu::fuzz::pipeline`). Seed corpus and dictionary:
//! fuzz/make-corpus.sh.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    phasecheck_gpu::fuzz::pipeline(data);
});

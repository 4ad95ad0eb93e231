//! Buffers smaller than the 16 bytes a buffer is laid out in: a whole-buffer read checks the words
//! the spec declares, not the padding. A 4-byte `cp_async` of a 4-byte buffer fills one word; the
//! read of the whole buffer saw the three padding words keep their old version and reported a
//! torn read the model never allows (the H100 run of `benches/outside/
//! cutlass_fp8_blockwise_tma_plus_cpasync`, 2026-12-07: 4,096 of 4,096 blocks "torn").

use phasecheck_gpu::codegen::{generate, Backend};
use phasecheck_model::{lang, program::lower::lower};

fn body(source: &str) -> String {
    let ast = lang::parse(source).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    lang::check(&ast).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    let proto = lower(&ast, &[]).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    generate(&proto, source, Backend::Ptx, 0).expect("expressible").body
}

/// The `pc_read` calls of a kernel body, by their word counts.
fn read_words(body: &str) -> Vec<String> {
    body.match_indices("pc_read(")
        .map(|(i, _)| {
            let args = &body[i + "pc_read(".len()..];
            let end = args.find(')').unwrap();
            args[..end].rsplit(", ").next().unwrap().trim().to_string()
        })
        .collect()
}

#[test]
fn a_read_of_a_small_buffer_checks_only_its_declared_words() {
    for (bytes, words) in [(4, "1"), (8, "2"), (12, "3"), (16, "4"), (20, "5"), (128, "32")] {
        let src = format!(
            "protocol small\nexpect holds\nbarrier b count 1\nbuffer x bytes {bytes}\n\nrole t[1] {{\n  write(x, 1)\n  read(x, expect = 1)\n}}\n"
        );
        assert_eq!(read_words(&body(&src)), vec![words.to_string()], "{bytes} bytes");
    }
}

#[test]
fn a_cp_async_of_a_four_byte_buffer_is_read_back_whole() {
    let src = "protocol small_cp_async\nexpect holds\nbarrier b count 1\nbuffer x bytes 4\n\n\
               role t[1] {\n  cp_async(x, version = 1)\n  cp_async_wait_all()\n  read(x, expect = 1)\n}\n";
    let body = body(src);
    assert!(body.contains("cp.async") || body.contains("pc_cp_async("), "{body}");
    assert_eq!(read_words(&body), vec!["1".to_string()]);
}

//! Warp-uniform roles on the GPU: an agent of a uniform role runs as its warp's
//! hardware lanes. Every uniform spec of the library generates in both backends (a regression to
//! "not expressible" fails here, where `nvrtc_compile` would only print it) and compiles with
//! NVRTC for sm_90; the kernel's block and its hardware-thread -> model-thread map give each agent
//! its warp's lanes.

use phasecheck_gpu::codegen::{
    block_words_of, generate, has_uniform, module_source, status, thread_lanes, Backend, HEADER_WORDS, THREAD_WORDS,
};
use phasecheck_gpu::compare::outcome_of;
use phasecheck_gpu::nvrtc;
use phasecheck_model::spec::{expand, load as load_spec, Spec};
use std::path::PathBuf;

fn uniform_specs() -> Vec<(PathBuf, Spec)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = expand(&[root.join("../specs")]).expect("spec folders");
    files
        .into_iter()
        .map(|f| {
            let spec = load_spec(&f, &[]).unwrap_or_else(|e| panic!("{e}"));
            (f, spec)
        })
        .filter(|(_, s)| has_uniform(&s.proto))
        .collect()
}

/// The uniform specs the GPU stage runs: those without a model-only statement (the Blackwell
/// statements, the warpgroup-scoped wgmma where wgmma is emulated), which it refuses by name.
fn uniform_gpu_specs() -> Vec<(PathBuf, Spec)> {
    uniform_specs()
        .into_iter()
        .filter(|(_, s)| !generate(&s.proto, &s.source, Backend::Ptx, 0).is_err_and(|e| e.model_only()))
        .collect()
}

#[test]
fn the_library_has_the_six_uniform_specs() {
    let names: Vec<String> = uniform_specs().iter().map(|(_, s)| s.proto.name.clone()).collect();
    for want in [
        "uniform_warp_arrival_count",
        "uniform_warp_arrival_count_fixed",
        "uniform_leader_releases_early",
        "uniform_leader_releases_early_fixed",
        "cutlass_pipeline_async_warpgroup_uniform",
        "fa3_fwd_persistent_ws_uniform",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
}

#[test]
fn every_uniform_spec_generates_in_both_backends() {
    let specs = uniform_gpu_specs();
    for (f, spec) in specs {
        for b in [Backend::Ptx, Backend::Libcu] {
            if let Err(e) = generate(&spec.proto, &spec.source, b, 0) {
                panic!("{} [{}]: {e}", f.display(), b.name());
            }
        }
    }
}

/// The hardware threads that the generated `model_thread` table maps to each model thread.
fn model_thread_map(body: &str) -> Vec<i64> {
    let line = body
        .lines()
        .find(|l| l.trim_start().starts_with("const int model_thread["))
        .expect("the kernel has its model_thread table");
    let list = &line[line.find('{').unwrap() + 1..line.rfind('}').unwrap()];
    list.split(',').map(|x| x.trim().parse().unwrap()).collect()
}

#[test]
fn an_agent_runs_as_its_warps_lanes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // One producer warp and one consumer warpgroup (4 agents), warp_size 32: 160 hardware threads.
    let spec = load_spec(&root.join("../specs/hopper/cutlass_pipeline_async_warpgroup_uniform.phase"), &[]).unwrap();
    let p = &spec.proto;
    assert_eq!(p.threads.len(), 5, "1 producer agent + 4 consumer agents");
    for b in [Backend::Ptx, Backend::Libcu] {
        let k = generate(p, &spec.source, b, 0).unwrap();
        assert_eq!(k.block_dim, 160, "every lane of every agent is a hardware thread");
        assert_eq!(k.lanes, vec![32; 5]);
        assert_eq!(k.threads, 5, "records stay one per agent");
        assert_eq!(k.block_words, block_words_of(p));
        assert_eq!(
            k.block_words,
            5 * THREAD_WORDS + 2 * p.barriers.len() + 5,
            "plus one lanes-apart word per agent"
        );
        let map = model_thread_map(&k.body);
        assert_eq!(map.len(), 160);
        for (hw, &t) in map.iter().enumerate() {
            assert_eq!(t, (hw / 32) as i64, "hardware thread {hw} is lane {} of agent {}", hw % 32, hw / 32);
        }
        assert!(k.body.contains("constexpr int NL = 160;"));
        assert!(k.body.contains("s.block_sync = PcSync{0, 0, NL, 0};"));
        assert!(k.body.contains("== NL - 1)"), "the end probe waits for every lane");
        assert!(k.body.contains("role_consumer(Shared& s, PcThread& th, PcU& u)"));
    }
}

#[test]
fn a_small_warp_size_leaves_the_other_hardware_lanes_idle() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec = load_spec(&root.join("../specs/hopper/uniform_warp_arrival_count_fixed.phase"), &[]).unwrap();
    let src = spec.source.replace("warp_size 32", "warp_size 4");
    let proto = phasecheck_model::api::parse_spec("ws4", &src, &[])
        .unwrap_or_else(|e| panic!("{e}"))
        .proto;
    assert_eq!(thread_lanes(&proto), vec![4, 4]);
    let k = generate(&proto, &src, Backend::Ptx, 0).unwrap();
    // Model warp w is hardware warp w; an agent takes its first 4 lanes.
    assert_eq!(k.block_dim, 36);
    let map = model_thread_map(&k.body);
    for (hw, &t) in map.iter().enumerate() {
        let want = match (hw / 32, hw % 32) {
            (w, l) if l < 4 => w as i64,
            _ => -1,
        };
        assert_eq!(t, want, "hardware thread {hw}");
    }
}

#[test]
fn the_lanes_apart_words_are_read_and_reported() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec = load_spec(&root.join("../specs/hopper/uniform_leader_releases_early_fixed.phase"), &[]).unwrap();
    let k = generate(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert_eq!(k.threads, 2);
    // Two blocks as the kernel writes them: agents finished, the consumer read 0, 1, 2.
    let mut words = vec![0i32; 2 * k.block_words];
    for b in 0..2 {
        let base = b * k.block_words;
        for t in 0..2 {
            words[base + t * THREAD_WORDS] = status::FINISHED;
        }
        let consumer = base + THREAD_WORDS;
        words[consumer + 1] = 3;
        for (i, v) in [0, 1, 2].into_iter().enumerate() {
            words[consumer + HEADER_WORDS + i] = v;
        }
    }
    // In block 1, lanes 3 and 17 of the consumer agent saw something else than its lane 0.
    words[2 * k.block_words - 1] = (1 << 3) | (1 << 17);
    let rec0 = k.parse_block(&words[..k.block_words]);
    assert_eq!(rec0.lanes_apart, vec![0, 0]);
    assert!(rec0.end_vars.is_empty(), "the lanes-apart words are not end vars");
    assert_eq!(rec0.threads[1].reads, vec![0, 1, 2]);
    let rec1 = k.parse_block(&words[k.block_words..]);
    assert_eq!(rec1.lanes_apart, vec![0, (1 << 3) | (1 << 17)]);
    let (o0, _, f0) = outcome_of(&k, &words, 0);
    let (o1, _, f1) = outcome_of(&k, &words, 1);
    assert_eq!(o0, o1, "the agent's outcome is its leader's record either way");
    assert!(!f0.lanes_apart);
    assert!(f1.lanes_apart);
    assert!(f1.describe().contains("lanes of a uniform warp observed differently"));
}

#[test]
fn ordinary_kernels_carry_no_lane_bookkeeping() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec = load_spec(&root.join("../specs/hopper/elect_whole_warp.phase"), &[]).unwrap();
    assert!(!has_uniform(&spec.proto));
    let k = generate(&spec.proto, &spec.source, Backend::Ptx, 0).unwrap();
    assert!(k.lanes.iter().all(|&l| l == 1));
    assert!(!k.body.contains("PcU"), "no uniform helpers in a kernel without uniform roles");
    assert_eq!(k.block_words, block_words_of(&spec.proto));
}

/// Every statement kind a uniform role may hold outside and inside an elected block, so that each
/// of the kernel's lane forms (meets, leader-only groups, token and answer broadcasts, var writes,
/// the hand-over at a block's end) is compiled, not only those the library's specs use.
const EVERY_LANE_FORM: &str = r#"
protocol uniform_every_lane_form
expect holds
warp_size 32

barrier full count 32
barrier tok_bar count 64
barrier done count 1
barrier counted count 1 completion bump
var ctrl = 0
var seen = 0
completion bump { seen = seen + 1 }
buffer tile bytes 256
buffer out bytes 256

role producer warps 1 uniform {
  let e = elect()
  if e == 1 {
    arrive_expect_tx(full, 256)
    copy_async(tile, full, version = 1)
    let k = ctrl
    if k == 0 {
      write(out, 2)
    }
  }
  syncwarp
  ctrl = ctrl + 1
  let c2 = arrive(counted)
  wait(counted, c2)
  expect_tx(done, 0)
  arrive(done)
  let t = arrive(tok_bar)
  wait(tok_bar, t)
  let ok = try_wait_parity(full, 0)
  copy_store_async(out)
  commit_group()
  wait_group_read(0)
  fence_proxy_async()
  syncthreads
}

role consumer warps 1 uniform {
  wait_parity(full, 0)
  read(tile, expect = 1)
  let c = ctrl
  if c == 1 {
    work
  }
  let t = arrive(tok_bar)
  let ok = try_wait(tok_bar, t)
  wait(tok_bar, t)
  let e = elect()
  if e == 1 {
    arrive(counted)
    read(tile, expect = 1)
  }
  syncthreads
}
"#;

#[test]
fn every_lane_form_generates_and_compiles() {
    // As written (libcu++ only: a barrier with a completion function), and with `counted` a
    // hardware mbarrier (both backends).
    let hardware = EVERY_LANE_FORM
        .replace("barrier counted count 1 completion bump", "barrier counted count 1")
        .replace("completion bump { seen = seen + 1 }", "");
    let mut kernels = Vec::new();
    for (name, text) in [("every_lane_form", EVERY_LANE_FORM), ("every_lane_form_hw", hardware.as_str())] {
        let spec = phasecheck_model::api::parse_spec(name, text, &[]).unwrap_or_else(|e| panic!("{e}"));
        every_lane_form_kernels(&spec, &mut kernels);
    }
    assert_eq!(kernels.len(), 3);
    if !nvrtc::available() {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("NVRTC is not installed but CI=true: source gpu-conformance/ci/setup-nvrtc.sh");
        }
        eprintln!("SKIPPED: libnvrtc not found");
        return;
    }
    for k in &kernels {
        if let Err(log) = nvrtc::compile_source(&k.source(), &format!("{}.cu", k.symbol)) {
            panic!("[{}]:\n{log}", k.backend.name());
        }
    }
}

fn every_lane_form_kernels(spec: &phasecheck_model::api::Loaded, kernels: &mut Vec<phasecheck_gpu::codegen::Kernel>) {
    let p = &spec.proto;
    assert_eq!(thread_lanes(p), vec![32, 32]);
    for b in [Backend::Ptx, Backend::Libcu] {
        match generate(p, &spec.source, b, 0) {
            Ok(k) => {
                for form in [
                    "pc_u_meet(th, u)",
                    "u.a->tok = (i64)(",
                    "ok = u.a->val != 0;",
                    "if (u.lane == 0) {  // once for the warp",
                    "if (u.in_block) pc_u_block_done(th, u);",
                    "pc_u_block_wait(th, u, elected_e_",
                    "s.var_ctrl = mine;",
                    "pc_sync(th, &s.block_sync)",
                ] {
                    assert!(k.body.contains(form), "[{}] lacks {form}", b.name());
                }
                kernels.push(k);
            }
            // The completion function makes `counted` a software barrier, which PTX lacks.
            Err(e) if b == Backend::Ptx && !p.completions.is_empty() => {
                assert!(e.to_string().contains("completion function"), "{e}")
            }
            Err(e) => panic!("[{}] {e}", b.name()),
        }
    }
}

#[test]
fn every_uniform_kernel_compiles_for_sm90() {
    if !nvrtc::available() {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("NVRTC is not installed but CI=true: source gpu-conformance/ci/setup-nvrtc.sh");
        }
        eprintln!("SKIPPED: libnvrtc not found (source gpu-conformance/ci/setup-nvrtc.sh to run this test)");
        return;
    }
    let mut failures = Vec::new();
    for b in [Backend::Ptx, Backend::Libcu] {
        let mut kernels = Vec::new();
        for (f, spec) in uniform_gpu_specs() {
            let k = generate(&spec.proto, &spec.source, b, kernels.len()).unwrap();
            if b == Backend::Ptx {
                if let Err(log) = nvrtc::compile_source(&k.source(), &format!("{}.cu", k.symbol)) {
                    failures.push(format!("{} [{}]:\n{log}", f.display(), b.name()));
                }
            }
            kernels.push(k);
        }
        // Together in one module: the helpers are emitted once per translation unit.
        let src = module_source(&kernels);
        assert_eq!(src.matches("#define PC_UNIFORM_HELPERS").count(), kernels.len());
        match nvrtc::compile_module(&kernels, "uniform.cu") {
            Ok(ptx) => {
                for k in &kernels {
                    assert!(ptx.contains(&format!(".entry {}", k.symbol)), "module PTX lacks {}", k.symbol);
                }
            }
            Err(log) => failures.push(format!("module [{}]:\n{log}", b.name())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

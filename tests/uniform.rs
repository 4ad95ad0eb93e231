//! Warp-uniform roles (docs/model.md, "Warp-uniform roles"): one agent per warp must mean what
//! the warp's lanes as separate threads mean, under the lockstep assumption. Every spec of the
//! library with a uniform role is checked both ways at warp_size 2, where the expanded form is
//! searchable: the uniform form may only leave out what lanes running apart can do.

mod common;
use common::{code, phasecheck, text};
use std::path::{Path, PathBuf};

fn uniform_specs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            uniform_specs(&p, out);
        } else if p.extension().is_some_and(|x| x == "phase") && std::fs::read_to_string(&p).unwrap().contains(" uniform {") {
            out.push(p);
        }
    }
}

/// (complete, kinds, states) of a check of `source`.
fn run(dir: &Path, name: &str, source: &str, bound: &str) -> (bool, Vec<String>, u64) {
    let f = dir.join(name);
    std::fs::write(&f, source).unwrap();
    let o = phasecheck(&[
        "check",
        f.to_str().unwrap(),
        "--format",
        "json",
        "--max-states",
        bound,
        "--threads",
        "1",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{name}: {e}: {}", text(&o.stderr)));
    let mut kinds: Vec<String> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap().to_string())
        .collect();
    kinds.sort();
    kinds.dedup();
    // Complete: no bound stopped the search (a violated search may still have been cut short).
    let complete = v["verdict"] != "incomplete" && v["bound"].is_null();
    (complete, kinds, v["stats"]["states"].as_u64().unwrap())
}

fn with_warp_size(source: &str, w: u32) -> String {
    source
        .lines()
        .map(|l| {
            if l.starts_with("warp_size ") {
                format!("warp_size {w}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the lanes of a warp running apart adds kinds that the lockstep model leaves out (said
/// in each spec's header).
const LANES_APART: &[&str] = &["uniform_warp_arrival_count", "cluster_uniform_remote_arrive_per_lane"];

#[test]
fn uniform_roles_agree_with_their_lanes_as_threads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut specs = Vec::new();
    uniform_specs(&root.join("specs"), &mut specs);
    specs.sort();
    assert!(specs.len() >= 6, "{specs:?}");
    let dir = std::env::temp_dir().join(format!("phasecheck-uniform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut compared = 0;
    for p in &specs {
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        let small = with_warp_size(&std::fs::read_to_string(p).unwrap(), 2);
        let (done_u, kinds_u, _) = run(&dir, &format!("{name}.u.phase"), &small, "2000000");
        assert!(done_u, "{name}: the uniform form must finish");
        let (done_x, kinds_x, _) = run(&dir, &format!("{name}.x.phase"), &small.replace(" uniform {", " {"), "300000");
        if !done_x {
            continue;
        }
        compared += 1;
        assert!(
            kinds_u.iter().all(|k| kinds_x.contains(k)),
            "{name}: the uniform form finds {kinds_u:?}, which the lanes as threads cannot reach ({kinds_x:?})"
        );
        assert_eq!(kinds_u.is_empty(), kinds_x.is_empty(), "{name}: {kinds_u:?} vs {kinds_x:?}");
        if !LANES_APART.contains(&name.as_str()) {
            assert_eq!(kinds_u, kinds_x, "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(compared >= 4, "only {compared} specs could be compared with their expanded form");
}

#[test]
fn a_uniform_warpgroup_costs_a_few_thousand_states_where_its_lanes_do_not_fit() {
    let f = "specs/hopper/cutlass_pipeline_async_warpgroup_uniform.phase";
    let o = phasecheck(&["check", f, "--threads", "1"]);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 0, "{out}");
    // With the partial-order reduction (uniform agents, elect and named barriers have footprints).
    assert!(out.contains("stats:   125 states"), "{out}");
    assert!(out.contains("consumer[128 uniform: 4 agents]"), "{out}");
    let o = phasecheck(&["check", f, "--threads", "1", "--no-por"]);
    assert!(text(&o.stdout).contains("stats:   2986 states"), "{}", text(&o.stdout));
    // The same protocol with every lane a thread, even at warp_size 2, is past 300,000 states
    // (both without the partial-order reduction: the model's sizes, not the reduction's).
    let dir = std::env::temp_dir().join(format!("phasecheck-uniform-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::fs::read_to_string(f).unwrap();
    let x = dir.join("x.phase");
    std::fs::write(&x, with_warp_size(&src, 2).replace(" uniform {", " {")).unwrap();
    let o = phasecheck(&[
        "check",
        x.to_str().unwrap(),
        "--format",
        "json",
        "--max-states",
        "300000",
        "--threads",
        "1",
        "--no-por",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let states = v["stats"]["states"].as_u64().unwrap();
    assert!(v["verdict"] == "incomplete" && states >= 300000, "{states}");
}

#[test]
fn a_role_declared_uniform_that_is_not_is_rejected_naming_why() {
    let dir = std::env::temp_dir().join(format!("phasecheck-uniform-e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "if lane == 0 {\n    arrive(done)\n  }",
            "E112",
            "branches on a value that depends on `lane`",
        ),
        (
            "let x = tid % 2\n  arrive(done, x + 1)",
            "E112",
            "passes to `arrive` a value that depends on `tid`",
        ),
        ("let e = elect()\n  arrive(done, e + 1)", "E112", "depends on `elect()`"),
        ("syncwarp(0x1)\n  arrive(done)", "E112", "not every lane of the warp"),
        ("let e = elect()\n  if e == 1 {\n    syncwarp\n  }", "E113", "warp-collective"),
        (
            "let e = elect()\n  if e == 1 {\n    arrive(done)\n  } else {\n    work\n  }",
            "E113",
            "an `else`",
        ),
    ];
    for (i, (body, want, says)) in cases.iter().enumerate() {
        let src = format!("protocol u\nexpect holds\nwarp_size 2\nbarrier done count 2\nrole w warps 1 uniform {{\n  {body}\n}}\n");
        let f = dir.join(format!("e{i}.phase"));
        std::fs::write(&f, &src).unwrap();
        let o = phasecheck(&["check", f.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(code(&o), 2, "{src}\n{err}");
        assert!(
            err.contains(want) && err.contains(says) && err.contains("role `w` is declared uniform"),
            "{src}\n{err}"
        );
        // Without `uniform` the same role is a valid protocol.
        std::fs::write(&f, src.replace(" uniform {", " {")).unwrap();
        assert_ne!(
            code(&phasecheck(&["check", f.to_str().unwrap(), "--max-states", "1000"])),
            2,
            "{src}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The warps of a uniform role are interchangeable across warps (crate::canon): the verdict and
/// the kinds must not depend on it.
#[test]
fn symmetry_across_uniform_warps_keeps_every_verdict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut specs = Vec::new();
    uniform_specs(&root.join("specs"), &mut specs);
    let kinds = |f: &str, extra: &[&str]| {
        let mut args = vec!["check", f, "--format", "json", "--threads", "1"];
        args.extend_from_slice(extra);
        let o = phasecheck(&args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut k: Vec<String> = v["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["kind"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        (
            v["verdict"].as_str().unwrap().to_string(),
            k,
            v["stats"]["states"].as_u64().unwrap(),
        )
    };
    let mut reduced = 0;
    for p in &specs {
        let f = p.to_str().unwrap();
        let (v1, k1, s1) = kinds(f, &[]);
        let (v2, k2, s2) = kinds(f, &["--no-symmetry"]);
        assert_eq!((v1, k1), (v2, k2), "{f}");
        reduced += (s1 < s2) as usize;
    }
    assert!(reduced >= 1, "no uniform spec is reduced by symmetry across warps");
}

mod generated {
    //! Generated uniform roles: whatever the lockstep model reports, the lanes as threads reach
    //! too (every uniform execution is an expanded one whose lanes go back to back).
    use phasecheck_model::api::parse_spec;
    use phasecheck_verifier::api::check_with;
    use phasecheck_verifier::search::{CheckOptions, Verdict};
    use proptest::prelude::*;

    fn stmt() -> impl Strategy<Value = (u8, u8)> {
        (0u8..7, 0u8..2)
    }

    fn body(stmts: &[(u8, u8)], role: &str) -> String {
        let mut out = String::new();
        for (n, &(s, b)) in stmts.iter().enumerate() {
            let e = format!("e_{role}_{n}");
            let line = match s {
                0 => format!("arrive(b[{b}])"),
                1 => format!("wait_parity(b[{b}], {})", n % 2),
                2 => "read(tile)".to_string(),
                3 => format!("let {e} = elect()\n  if {e} == 1 {{\n    arrive(b[{b}])\n  }}"),
                4 => format!("let {e} = elect()\n  if {e} == 1 {{\n    arrive_expect_tx(b[{b}], 64)\n    copy_async(tile, b[{b}])\n  }}"),
                5 => "syncwarp".to_string(),
                _ => format!("let {e} = elect()\n  if {e} == 1 {{\n    write(tile, {n})\n  }}"),
            };
            out.push_str("  ");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    fn kinds(src: &str) -> Option<(Verdict, Vec<&'static str>)> {
        let spec = parse_spec("gen.phase", src, &[]).unwrap_or_else(|e| panic!("{src}\n{e}"));
        let opts = CheckOptions {
            max_states: Some(60_000),
            ..Default::default()
        };
        let c = check_with(&spec, &opts);
        let mut k = c.kinds();
        k.sort();
        k.dedup();
        // A search that hit its bound may have found some kinds and not others (its verdict is
        // then `violated`, not `incomplete`): only a complete one is compared.
        c.report.bound.is_none().then_some((c.verdict(), k))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn lockstep_kinds_are_a_subset_of_the_lanes_kinds(
            counts in (1u8..5, 1u8..5),
            p in prop::collection::vec(stmt(), 1..4),
            q in prop::collection::vec(stmt(), 1..4),
        ) {
            let src = format!(
                "protocol gen\nwarp_size 2\n\nbarrier b[2] count {}\nbuffer tile bytes 64\n\nrole p warps 1 uniform {{\n{}}}\n\nrole q warps 1 uniform {{\n{}}}\n",
                counts.0.max(counts.1), body(&p, "p"), body(&q, "q")
            );
            let Some((vu, ku)) = kinds(&src) else { return Ok(()) };
            prop_assert!(vu != Verdict::InternalError, "{src}");
            let Some((_, kx)) = kinds(&src.replace(" uniform {", " {")) else { return Ok(()) };
            prop_assert!(ku.iter().all(|k| kx.contains(k)), "{src}\nuniform {ku:?}, lanes as threads {kx:?}");
        }
    }
}

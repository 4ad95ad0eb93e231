//! Cluster scope: how `cluster N` lowers. Every table is repeated CTA-major, each CTA's code names
//! its own copies, threads are numbered CTA by CTA in whole warps, and `cluster 1` is the protocol
//! without a `cluster` line.

use phasecheck_model::api::parse_spec;
use phasecheck_model::program::ir::{IOp, InstrKind, MbarOp};

const BODY: &str = "barrier full[2] count 1 completion c\nvar turns = 0\ncompletion c { turns = turns + 1 }\nbuffer tile bytes 64\nrole producer[1] { arrive(full[0]) }\nrole consumer warps 1 { wait_parity(full[0], 0)\nread(tile) }\n";

#[test]
fn every_table_is_repeated_per_cta_and_each_cta_names_its_own_copies() {
    let p = parse_spec("c", &format!("protocol c\nwarp_size 4\ncluster 3\n{BODY}"), &[])
        .unwrap()
        .proto;
    assert_eq!(p.cluster, 3);
    let names: Vec<&str> = p.barriers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cta0.full[0]",
            "cta0.full[1]",
            "cta1.full[0]",
            "cta1.full[1]",
            "cta2.full[0]",
            "cta2.full[1]"
        ]
    );
    assert_eq!(p.barrier_groups.iter().map(|g| g.base).collect::<Vec<_>>(), [0, 2, 4]);
    // Each CTA's barriers run that CTA's copy of the completion, which writes that CTA's var.
    assert_eq!(
        p.barriers.iter().map(|b| b.completion).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2)]
    );
    for (c, code) in p.completions.iter().enumerate() {
        assert!(code
            .instrs
            .iter()
            .any(|i| matches!(i.kind, InstrKind::SetVar { var, .. } if var as usize == c)));
    }
    assert_eq!(
        p.vars.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
        ["cta0.turns", "cta1.turns", "cta2.turns"]
    );
    // CTA 2's producer arrives on CTA 2's group.
    let producer2 = &p.roles[4];
    assert_eq!(producer2.name, "cta2.producer");
    assert!(producer2
        .code
        .instrs
        .iter()
        .any(|i| matches!(&i.kind, InstrKind::Op { op: IOp::Mbar(MbarOp::Arrive { bar, .. }), .. } if bar.group == 2)));
}

#[test]
fn threads_are_numbered_cta_by_cta_in_whole_warps() {
    let p = parse_spec("c", &format!("protocol c\nwarp_size 4\ncluster 2\n{BODY}"), &[])
        .unwrap()
        .proto;
    // One CTA: producer at gtid 0, the consumer warp at 4..8: a stride of 8 model threads.
    assert_eq!(p.cta_stride(), 8);
    let at: Vec<(u16, u32, u32, u32)> = p.threads.iter().map(|t| (t.cta, t.gtid, t.warp, t.lane)).collect();
    assert_eq!(
        at,
        [
            (0, 0, 0, 0),
            (0, 4, 1, 0),
            (0, 5, 1, 1),
            (0, 6, 1, 2),
            (0, 7, 1, 3),
            (1, 8, 2, 0),
            (1, 12, 3, 0),
            (1, 13, 3, 1),
            (1, 14, 3, 2),
            (1, 15, 3, 3)
        ]
    );
    assert_eq!(p.cta_of_barrier(3), 1);
    assert_eq!(p.cta_of_buffer(1), 1);
}

#[test]
fn cluster_one_lowers_exactly_as_no_cluster_line() {
    // A comment as long as the `cluster 1` line keeps every span the same.
    let plain = parse_spec("c", &format!("protocol c\n// ------\n{BODY}"), &[]).unwrap().proto;
    let one = parse_spec("c", &format!("protocol c\ncluster 1\n{BODY}"), &[]).unwrap().proto;
    assert_eq!(format!("{plain:?}"), format!("{one:?}"));
    assert_eq!(plain.cluster, 1);
}

/// A cluster repeats every table per CTA, so the model's 16-bit tables must hold the repeated
/// count: 33,000 barriers (or buffers, or vars) fit one CTA but not two, and `cluster 2` refuses
/// them (E108) instead of numbering the second CTA's copies past the table.
#[test]
fn the_table_bounds_count_every_cta_of_the_cluster() {
    let many = |one: &str, n: usize| (0..n).map(|k| one.replace('K', &k.to_string())).collect::<Vec<_>>().join("\n");
    for (table, decl) in [
        ("barriers", many("barrier bK[1000] count 1", 33)),
        ("buffers", many("buffer tK[1000] bytes 4", 33)),
        ("shared vars", many("var vK = 0", 33_000)),
    ] {
        let src = |cluster: u32| format!("protocol c\ncluster {cluster}\n{decl}\nrole w[1] {{ work }}\n");
        parse_spec("c", &src(1), &[]).unwrap_or_else(|e| panic!("{table}, one CTA: {e}"));
        let e = parse_spec("c", &src(2), &[])
            .err()
            .unwrap_or_else(|| panic!("{table}: two CTAs accepted"));
        assert!(e.contains("E108") && e.contains(table), "{table}: {e}");
    }
}

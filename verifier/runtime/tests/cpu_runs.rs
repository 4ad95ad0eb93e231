//! The loom models' specs, run on OS threads: every outcome is one the model allows, the laws hold.
#![cfg(not(loom))]

use phasecheck_runtime::cpu::run_cpu;
use std::path::Path;

const SPECS: [&str; 18] = [
    "double_buffer",
    "parity_ring",
    "drop_on_exit",
    "completion_rotate",
    "split_arrive_wait",
    "tx_transient_negative",
    "try_wait_polling",
    "token_wait",
    "arrive_twice",
    "completion_race",
    "named_barrier",
    "cluster_remote_arrive",
    "elect_commit",
    "cp_async_arrive",
    "partial_copies",
    "async_proxy",
    "syncwarp_mask",
    "complete_tx_race",
];

#[test]
fn every_outcome_on_os_threads_is_one_the_model_allows() {
    for name in SPECS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs").join(format!("{name}.phase"));
        let proto = phasecheck_model::spec::load(&path, &[]).unwrap().proto;
        let rep = run_cpu(&proto, 40, 7).unwrap();
        let text = rep.render(&proto);
        assert!(rep.outside().is_empty(), "{name}:\n{text}");
        assert!(rep.histogram.broken.is_empty(), "{name}:\n{text}");
        assert!(rep.histogram.undefined.is_empty(), "{name}:\n{text}");
        assert_eq!(rep.histogram.runs, 40);
    }
}

#[test]
fn a_tma_store_whose_read_is_never_retired_is_lifetime_on_the_runtime_as_in_the_model() {
    // The proxy still reads the tile when the thread exits: shared memory released under it.
    let spec = phasecheck_model::api::SpecBuilder::new("unretired_store")
        .buffer("tile bytes 16")
        .role(
            "w",
            1,
            "write(tile, 1)\nfence_proxy_async()\ncopy_store_async(tile)\ncommit_group()",
        )
        .build()
        .unwrap();
    let rep = run_cpu(&spec.proto, 20, 3).unwrap();
    let text = rep.render(&spec.proto);
    assert_eq!(rep.histogram.undefined.get("lifetime"), Some(&20), "{text}");
    assert!(rep.outside().is_empty(), "{text}");
    // Retired by its wait, the same store is defined.
    let fixed = phasecheck_model::api::SpecBuilder::new("retired_store")
        .buffer("tile bytes 16")
        .role(
            "w",
            1,
            "write(tile, 1)\nfence_proxy_async()\ncopy_store_async(tile)\ncommit_group()\nwait_group_read(0)",
        )
        .build()
        .unwrap();
    let rep = run_cpu(&fixed.proto, 20, 3).unwrap();
    assert!(rep.histogram.undefined.is_empty(), "{}", rep.render(&fixed.proto));
}

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

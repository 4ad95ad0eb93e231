//! The violation kinds of SEMANTICS.md. Their names are stable: they appear in CLI output, JSON,
//! `expect` lines and docs/rules.md, so renaming one breaks users' specs.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    Deadlock,
    OverArrival,
    CountRange,
    TxRange,
    StaleWait,
    MissingWait,
    Uninitialized,
    DataRace,
    StaleRead,
    CompletionMisuse,
    Entanglement,
    Lifetime,
    Assertion,
}

impl ViolationKind {
    pub const ALL: [ViolationKind; 13] = [
        ViolationKind::Deadlock,
        ViolationKind::OverArrival,
        ViolationKind::CountRange,
        ViolationKind::TxRange,
        ViolationKind::StaleWait,
        ViolationKind::MissingWait,
        ViolationKind::Uninitialized,
        ViolationKind::DataRace,
        ViolationKind::StaleRead,
        ViolationKind::CompletionMisuse,
        ViolationKind::Entanglement,
        ViolationKind::Lifetime,
        ViolationKind::Assertion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Deadlock => "deadlock",
            ViolationKind::OverArrival => "over-arrival",
            ViolationKind::CountRange => "count-range",
            ViolationKind::TxRange => "tx-range",
            ViolationKind::StaleWait => "stale-wait",
            ViolationKind::MissingWait => "missing-wait",
            ViolationKind::Uninitialized => "uninitialized",
            ViolationKind::DataRace => "data-race",
            ViolationKind::StaleRead => "stale-read",
            ViolationKind::CompletionMisuse => "completion-misuse",
            ViolationKind::Entanglement => "entanglement",
            ViolationKind::Lifetime => "lifetime",
            ViolationKind::Assertion => "assertion",
        }
    }

    /// Message code shown next to the kind (`PC0xx`), so a report line can be looked up in
    /// docs/rules.md.
    pub fn code(self) -> &'static str {
        match self {
            ViolationKind::Deadlock => "PC001",
            ViolationKind::OverArrival => "PC002",
            ViolationKind::CountRange => "PC003",
            ViolationKind::TxRange => "PC004",
            ViolationKind::StaleWait => "PC005",
            ViolationKind::MissingWait => "PC006",
            ViolationKind::Uninitialized => "PC007",
            ViolationKind::DataRace => "PC008",
            ViolationKind::StaleRead => "PC009",
            ViolationKind::CompletionMisuse => "PC010",
            ViolationKind::Entanglement => "PC011",
            ViolationKind::Lifetime => "PC012",
            ViolationKind::Assertion => "PC013",
        }
    }

    pub fn from_name(s: &str) -> Option<ViolationKind> {
        ViolationKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Undefined behaviour ends the execution: nothing after it is meaningful, so the search does
    /// not continue from the state it produced. The other kinds describe a wrong but defined
    /// execution (hardware keeps going), and the search goes on to find what follows.
    pub fn ends_execution(self) -> bool {
        matches!(
            self,
            ViolationKind::OverArrival
                | ViolationKind::CountRange
                | ViolationKind::TxRange
                | ViolationKind::Uninitialized
                | ViolationKind::Lifetime
                | ViolationKind::Assertion
                | ViolationKind::Deadlock
        )
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

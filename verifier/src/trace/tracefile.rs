//! The counterexample trace file: a self-describing JSON record of one violating execution that
//! `phasecheck replay` re-executes and the GPU replay drives. docs/trace-format.md documents every
//! field; bump `SCHEMA_VERSION` whenever a field changes meaning or shape.

use crate::trace::{replay, BarrierChange, CopyRef, ThreadRef};
use phasecheck_model::lang::ast::Span;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::rt::state::{State, Status};
use phasecheck_model::rt::{Action, Model, Obs};
use phasecheck_model::ViolationKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the trace-file schema this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// 64-bit FNV-1a over the bytes of `text`: stable across platforms and releases.
pub fn fnv1a64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The spec hash recorded in a trace: `fnv1a64:` and 16 hex digits.
pub fn source_hash(text: &str) -> String {
    format!("fnv1a64:{:016x}", fnv1a64(text))
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TraceFile {
    pub schema: u32,
    /// `phasecheck <version>` that wrote the file (informational).
    pub generator: String,
    pub spec: SpecRef,
    /// Every parameter of the protocol with the value the trace was found under.
    pub params: BTreeMap<String, i64>,
    /// Every thread of the CTA, by global index (`action.thread` indexes this list).
    pub threads: Vec<ThreadRef>,
    /// Flattened barrier names, in declaration order: `bar` indices in observations point here.
    pub barriers: Vec<String>,
    /// Flattened buffer names, in declaration order: `buf` indices in observations point here.
    pub buffers: Vec<String>,
    pub violation: ViolationRec,
    pub steps: Vec<StepRec>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SpecRef {
    /// The `protocol` name.
    pub name: String,
    /// Path of the `.phase` file, relative to the trace file's folder when it was written.
    pub path: String,
    /// `source_hash` of the file's text.
    pub hash: String,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RaisedBy {
    /// The initial state (e.g. a declared count out of range); `steps` is empty.
    InitialState,
    /// The last step raised it.
    Step,
    /// The state after the last step has it (deadlock, a stale blocked wait, exit with copies in
    /// flight).
    State,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ViolationRec {
    pub kind: ViolationKind,
    /// `PC0xx` code of the kind.
    pub code: String,
    pub message: String,
    pub raised_by: RaisedBy,
    /// For a state violation: the statements the blocked threads are stopped at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck: Vec<StuckRec>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StuckRec {
    pub thread: ThreadRef,
    pub statement: String,
    pub span: SpanRec,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct SpanRec {
    /// 1-based line and column (in characters) of the statement's start.
    pub line: usize,
    pub col: usize,
    /// Byte range of the statement in the spec's text.
    pub start: u32,
    pub end: u32,
}

impl SpanRec {
    pub fn from_span(source: &str, span: Span) -> SpanRec {
        let (line, col) = line_col(source, span.start as usize);
        SpanRec {
            line,
            col,
            start: span.start,
            end: span.end,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StepRec {
    /// 1-based position in the trace.
    pub step: usize,
    /// What the scheduler chose: `{"thread": i}` (global thread index) or `{"land": i}` (index
    /// into the copies in flight, in issue order).
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyRef>,
    /// The statement's source text (for a landing: the statement that issued the copy).
    pub statement: String,
    pub span: SpanRec,
    /// Every value the step observed, in order; replay must see exactly these again.
    pub observed: Vec<Obs>,
    /// Barrier fields whose values changed.
    pub changes: Vec<BarrierChange>,
    /// Violations this step raised (kind names), in the order the model raised them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raised: Vec<ViolationKind>,
}

/// The statement text of a span: its first line, trimmed.
pub fn statement_text(source: &str, span: Span) -> String {
    let s = source.get(span.start as usize..span.end as usize).unwrap_or("");
    let first = s.lines().next().unwrap_or("").trim();
    if s.lines().nth(1).is_some() {
        format!("{first} ...")
    } else {
        first.to_string()
    }
}

/// Where a violation of `kind` is reached along `actions`: by the initial state, by a step, or
/// by the state after the last step. `None` when the trace does not reach it at its end.
pub fn raised_by(model: &Model, actions: &[Action], kind: ViolationKind) -> Option<(RaisedBy, String)> {
    let r = replay(model, actions).ok()?;
    if actions.is_empty() {
        if let Some(v) = r.init_violations.iter().find(|v| v.kind == kind) {
            return Some((RaisedBy::InitialState, v.message.clone()));
        }
    }
    if let Some(last) = r.steps.last() {
        if let Some(v) = last.violations.iter().find(|v| v.kind == kind) {
            return Some((RaisedBy::Step, v.message.clone()));
        }
    }
    crate::explain::state_violations(model, &r)
        .into_iter()
        .find(|v| v.kind == kind)
        .map(|v| (RaisedBy::State, v.message))
}

/// The unfinished threads that cannot step in `s` (blocked at a wait or an execution barrier).
fn stuck(model: &Model, source: &str, s: &State) -> Vec<StuckRec> {
    let mut out = Vec::new();
    let mut en = Vec::new();
    model.actions(s, &mut en);
    for (t, th) in s.threads.iter().enumerate() {
        if th.status == Status::Done || en.contains(&Action::Thread(t as u16)) {
            continue;
        }
        let Some(i) = model.proto.code_of(t).instrs.get(th.pc as usize) else {
            continue;
        };
        out.push(StuckRec {
            thread: crate::trace::thread_ref(model, t),
            statement: statement_text(source, i.span),
            span: SpanRec::from_span(source, i.span),
        });
    }
    out
}

/// Build the trace file for `actions` reaching `kind`. `spec_path` is stored as given.
pub fn build(model: &Model, source: &str, spec_path: &str, kind: ViolationKind, actions: &[Action]) -> Result<TraceFile, String> {
    let p = &model.proto;
    let r = replay(model, actions).map_err(|e| format!("the trace does not replay at step {}: {}", e.step + 1, e.reason))?;
    let (how, message) = raised_by(model, actions, kind).ok_or_else(|| format!("the trace does not reach a {kind} violation"))?;
    let steps = r
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| StepRec {
            step: i + 1,
            action: s.action,
            thread: s.thread.clone(),
            copy: s.copy.clone(),
            statement: statement_text(source, s.span),
            span: SpanRec::from_span(source, s.span),
            observed: s.obs.clone(),
            changes: s.changes.clone(),
            raised: s.violations.iter().map(|v| v.kind).collect(),
        })
        .collect();
    let stuck = match (how, &r.last) {
        (RaisedBy::State, Some(s)) => stuck(model, source, s),
        _ => Vec::new(),
    };
    Ok(TraceFile {
        schema: SCHEMA_VERSION,
        generator: format!("phasecheck {}", env!("CARGO_PKG_VERSION")),
        spec: SpecRef {
            name: p.name.clone(),
            path: spec_path.to_string(),
            hash: source_hash(source),
        },
        params: p.params.iter().cloned().collect(),
        threads: (0..p.threads.len()).map(|t| crate::trace::thread_ref(model, t)).collect(),
        barriers: p.barriers.iter().map(|b| b.name.clone()).collect(),
        buffers: p.buffers.iter().map(|b| b.name.clone()).collect(),
        violation: ViolationRec {
            kind,
            code: kind.code().to_string(),
            message,
            raised_by: how,
            stuck,
        },
        steps,
    })
}

impl TraceFile {
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("trace files serialize");
        s.push('\n');
        s
    }

    /// Parse a trace file. The schema version is checked before anything else so that a file
    /// from another version fails with that explanation rather than a field error.
    pub fn from_json(text: &str) -> Result<TraceFile, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not a JSON trace file: {e}"))?;
        match v.get("schema").and_then(|s| s.as_u64()) {
            None => return Err("not a phasecheck trace file: it has no `schema` version".into()),
            Some(n) if n != SCHEMA_VERSION as u64 => {
                return Err(format!(
                    "the trace was written with trace schema version {n}, but this phasecheck reads version {SCHEMA_VERSION}; regenerate it with `phasecheck check SPEC --trace-dir DIR`"
                ))
            }
            Some(_) => {}
        }
        serde_json::from_value(v).map_err(|e| format!("malformed trace file (schema {SCHEMA_VERSION}): {e}"))
    }

    /// Fails when `source` is not the text the trace was written for.
    pub fn check_source(&self, source: &str) -> Result<(), String> {
        let now = source_hash(source);
        if now != self.spec.hash {
            return Err(format!(
                "the spec {} has changed since this trace was written (hash {} in the trace, {} now); regenerate the trace with `phasecheck check {} --trace-dir DIR`",
                self.spec.path, self.spec.hash, now, self.spec.path
            ));
        }
        Ok(())
    }

    /// What a replay of the observations does not re-derive must still be the spec's: the
    /// thread, barrier and buffer tables, and for every step its thread (or copy), position
    /// (`start..end`, line, column) and statement text, and the stuck threads of a state
    /// violation. A file that disagrees was edited: bad input. Observations are the caller's to
    /// compare (a difference there is a divergence, naming the step).
    pub fn check_against(&self, model: &Model, source: &str) -> Result<(), String> {
        let p = &model.proto;
        let threads: Vec<ThreadRef> = (0..p.threads.len()).map(|t| crate::trace::thread_ref(model, t)).collect();
        if self.threads != threads {
            return Err("the thread table is not the spec's threads (roles, tid, gtid, lane, warp)".into());
        }
        if self.barriers.iter().ne(p.barriers.iter().map(|b| &b.name)) {
            return Err("the barrier table is not the spec's barriers".into());
        }
        if self.buffers.iter().ne(p.buffers.iter().map(|b| &b.name)) {
            return Err("the buffer table is not the spec's buffers".into());
        }
        let actions: Vec<Action> = self.steps.iter().map(|s| s.action).collect();
        let Ok(r) = replay(model, &actions) else {
            return Ok(());
        };
        for (rec, s) in self.steps.iter().zip(&r.steps) {
            let span = SpanRec::from_span(source, s.span);
            if rec.span != span || rec.statement != statement_text(source, s.span) {
                return Err(format!(
                    "step {}: the recorded statement (line {}, col {}) is not the one the step executes (line {}, col {})",
                    rec.step, rec.span.line, rec.span.col, span.line, span.col
                ));
            }
            if rec.thread != s.thread || rec.copy != s.copy {
                return Err(format!(
                    "step {}: the recorded thread or copy is not the one its action names",
                    rec.step
                ));
            }
        }
        if let (RaisedBy::State, Some(last)) = (self.violation.raised_by, &r.last) {
            if self.violation.stuck != stuck(model, source, last) {
                return Err("the recorded stuck threads are not those of the final state".into());
            }
        }
        Ok(())
    }

    /// The violation step (1-based) the rendering marks: the last step for a step violation.
    pub fn violating_step(&self) -> Option<usize> {
        match self.violation.raised_by {
            RaisedBy::Step => Some(self.steps.len()),
            _ => None,
        }
    }
}

/// One-line description of an observation with names resolved from the file's tables.
pub fn obs_text(t: &TraceFile, o: &Obs) -> String {
    crate::trace::describe_obs(o, t)
}

impl crate::trace::Names for TraceFile {
    fn barrier(&self, i: u16) -> String {
        self.barriers.get(i as usize).cloned().unwrap_or_else(|| format!("barrier#{i}"))
    }
    fn buffer(&self, i: u16) -> String {
        self.buffers.get(i as usize).cloned().unwrap_or_else(|| format!("buffer#{i}"))
    }
    fn thread(&self, i: u16) -> String {
        self.threads
            .get(i as usize)
            .map(|r| format!("{}#{}", r.role, r.tid))
            .unwrap_or_else(|| format!("thread {i}"))
    }
}

pub fn changes_text(c: &BarrierChange) -> String {
    format!(
        "{}: {}",
        c.barrier,
        c.fields
            .iter()
            .map(|f| format!("{} {}->{}", f.field, f.before, f.after))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `role#tid` or `copy->buffer` for a step.
pub fn actor(s: &StepRec) -> String {
    match (&s.thread, &s.copy) {
        (Some(t), _) => format!("{}#{}", t.role, t.tid),
        (None, Some(c)) => format!("copy->{}", c.buffer),
        _ => "?".into(),
    }
}

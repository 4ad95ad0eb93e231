//! `phasecheck import`: recovers one CTA's barrier protocol from the PTX of a kernel and
//! writes it as a `.phase` spec, so that the protocol checked is the one the compiler saw
//! (templates resolved, build flags applied) rather than a hand transcription.
//!
//! The pipeline: [`ptx::parse`] the module, run the entry once per thread of the block
//! ([`exec`]: a per-register value analysis that knows constants, thread indices, params,
//! shared-memory symbols and tokens), then group threads with the same path into roles and
//! print the spec ([`emit`]). Every barrier fact is recorded as exact, assumed or unresolved
//! ([`facts`]).

pub mod cfg;
pub mod desc;
pub mod emit;
pub mod events;
pub mod exec;
pub mod facts;
pub mod names;
pub mod ptx;
pub mod reroll;
pub mod values;

use std::collections::HashMap;

/// What to import and how.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The `.entry` to import; `None` takes the only one.
    pub entry: Option<String>,
    /// Threads per block (x, y, z); `None` takes `.reqntid`, else `.maxntid`.
    pub block: Option<[u32; 3]>,
    /// Kernel param values by name (`tma_ring_param_0`) or index (`0`).
    pub params: HashMap<String, i64>,
    /// Bytes of each tensor copy, by its tensor-map param or destination buffer name.
    pub tma_bytes: HashMap<String, i64>,
    /// The name statements cite when the PTX has no `.loc` (the PTX file's).
    pub ptx_name: String,
}

/// A successful import.
pub struct Imported {
    pub entry: String,
    pub block: [u32; 3],
    /// The `.phase` text (it parses and passes the static checks).
    pub spec: String,
    pub facts: facts::Facts,
    pub roles: Vec<emit::RoleSummary>,
    pub barriers: Vec<String>,
    module: ptx::Module,
    ptx_name: String,
}

impl Imported {
    /// Where a fact came from, as the spec's `// from` comments say it.
    pub fn origin(&self, f: &facts::Fact) -> String {
        emit::origin(&f.src, f.pos, &self.module, &self.ptx_name)
    }
}

/// Why nothing was imported.
#[derive(Clone, Debug)]
pub enum ImportError {
    /// The PTX text is malformed: line, column and one sentence.
    Ptx(ptx::PtxError),
    /// The input is well-formed but cannot be imported as asked (one sentence).
    Input(String),
}

impl ImportError {
    /// `FILE:LINE:COL: error: ...` (or `FILE: error: ...`).
    pub fn render(&self, file: &str) -> String {
        match self {
            ImportError::Ptx(e) => format!("{file}:{}:{}: error: {}", e.pos.line, e.pos.col, e.message),
            ImportError::Input(m) => format!("{file}: error: {m}"),
        }
    }
}

/// Import the protocol of one entry of a PTX module.
pub fn import(ptx_text: &str, opts: &Options) -> Result<Imported, ImportError> {
    let m = ptx::parse(ptx_text).map_err(ImportError::Ptx)?;
    let entries: Vec<&ptx::Function> = m.functions.iter().filter(|f| f.is_entry).collect();
    let entry = match &opts.entry {
        Some(name) => *entries.iter().find(|f| &f.name == name).ok_or_else(|| {
            ImportError::Input(format!(
                "there is no entry `{name}` (entries: {})",
                entries.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?,
        None => match entries.as_slice() {
            [one] => *one,
            [] => return Err(ImportError::Input("the PTX has no `.entry` to import".into())),
            many => {
                return Err(ImportError::Input(format!(
                    "the PTX has {} entries; name one with --entry ({})",
                    many.len(),
                    many.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                )))
            }
        },
    };
    let block = opts.block.or(entry.reqntid).or(entry.maxntid).ok_or_else(|| {
        ImportError::Input(format!(
            "the block size of `{}` is not in the PTX (no .reqntid/.maxntid): give --block X[,Y,Z]",
            entry.name
        ))
    })?;
    let threads = block[0] as u64 * block[1] as u64 * block[2] as u64;
    if threads == 0 || threads > 1024 {
        return Err(ImportError::Input(format!(
            "a block of {threads} threads is not a CUDA block (1 to 1024)"
        )));
    }
    let mut interp = exec::Interp::new(&m);
    let launch = exec::Launch {
        block,
        params: &opts.params,
        tma_bytes: &opts.tma_bytes,
    };
    let mut runs = Vec::new();
    for z in 0..block[2] {
        for y in 0..block[1] {
            for x in 0..block[0] {
                let mut r = interp.run(entry, [x, y, z], &launch);
                r.events = emit::merge_accesses(r.events);
                runs.push(r);
            }
        }
    }
    let mut facts = interp.facts;
    let (body, roles, barriers) = emit::spec_body(&m, &runs, &mut facts, &opts.ptx_name);
    if roles.is_empty() && facts.unresolved_count() == 0 {
        // nothing of the protocol language ran: a spec needs a role, and an empty one would
        // claim a protocol that holds
        let dropped: usize = facts.dropped.values().sum();
        return Err(ImportError::Input(format!(
            "`{}` has no barrier operation, async copy or shared-memory access on any thread's path \
             ({dropped} data-path instruction(s) dropped): there is no protocol to import",
            entry.name
        )));
    }
    let name = names::demangle(&entry.name);
    let mut spec = String::new();
    spec.push_str(&format!(
        "// Imported by `phasecheck import` from {}: entry `{}`, block {}x{}x{}.\n",
        opts.ptx_name, entry.name, block[0], block[1], block[2]
    ));
    spec.push_str(&format!("protocol {name}\nwarp_size 32\n\n"));
    spec.push_str(&body);
    if let Err(d) = phasecheck_model::api::parse_spec(&format!("{name}.phase"), &spec, &[]) {
        return Err(ImportError::Input(format!(
            "the recovered protocol is not a spec phasecheck accepts (please report this):\n{d}\n{spec}"
        )));
    }
    Ok(Imported {
        entry: entry.name.clone(),
        block,
        spec,
        facts,
        roles,
        barriers,
        module: m,
        ptx_name: opts.ptx_name.clone(),
    })
}

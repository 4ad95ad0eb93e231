//! The library API for users' own tests: parse a spec, or build one from parts, and get the
//! executable [`Protocol`] the checker and the runtime take. Checking lives one crate up
//! (`phasecheck_verifier::api`), because the search depends on this crate, not the reverse.
//!
//! A [`SpecBuilder`] writes `.phase` text and sends it through the real front end (parser,
//! checks, lowering), so a built protocol means exactly what the same text in a file means, and
//! its diagnostics are the CLI's.
//!
//! ```
//! use phasecheck_model::api::SpecBuilder;
//!
//! let spec = SpecBuilder::new("handoff")
//!     .barrier("ready count 1")
//!     .buffer("data bytes 4")
//!     .role("producer", 1, "write(data, 1)\narrive(ready)")
//!     .role("consumer", 1, "wait_parity(ready, 0)\nread(data, expect = 1)")
//!     .build()
//!     .unwrap();
//! assert_eq!(spec.proto.threads.len(), 2);
//! assert!(spec.source.contains("role consumer[1]"));
//! ```

use crate::lang::{self, ast};
use crate::program::ir::Protocol;
use crate::program::lower::lower;

/// A spec that went through the whole front end.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The text (as given, or as the builder wrote it).
    pub source: String,
    pub ast: ast::Program,
    /// What the checker and the runtime execute.
    pub proto: Protocol,
}

/// Parse, check and lower `.phase` text. `overrides` set declared params (like `--param`); an
/// override the spec does not declare is an error. Errors are rendered diagnostics (line:col,
/// caret, one sentence) naming the file as `name`.
pub fn parse_spec(name: &str, source: &str, overrides: &[(&str, i64)]) -> Result<Loaded, String> {
    let render = |d: lang::Diagnostic| d.render(name, source);
    let ast = lang::parse(source).map_err(render)?;
    lang::check(&ast).map_err(render)?;
    for (k, _) in overrides {
        if !ast.params().any(|p| p.name.name == *k) {
            return Err(format!("error: `{k}` is not a param of {name}\n"));
        }
    }
    let ov: Vec<(String, i64)> = overrides.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let proto = lower(&ast, &ov).map_err(render)?;
    Ok(Loaded {
        source: source.to_string(),
        ast,
        proto,
    })
}

/// Builds `.phase` text from declarations and role bodies (each written in the language), in the
/// order LANGUAGE.md shows: header, params, declarations, completions, roles.
#[derive(Clone, Debug, Default)]
pub struct SpecBuilder {
    name: String,
    expect: Option<String>,
    warp_size: Option<u32>,
    params: Vec<(String, i64)>,
    decls: Vec<String>,
    completions: Vec<(String, String)>,
    roles: Vec<(String, u32, String)>,
}

impl SpecBuilder {
    pub fn new(name: &str) -> SpecBuilder {
        SpecBuilder {
            name: name.to_string(),
            ..SpecBuilder::default()
        }
    }

    /// `expect KINDS` (e.g. `"holds"`, `"deadlock, stale-wait"`).
    pub fn expect(mut self, kinds: &str) -> Self {
        self.expect = Some(kinds.to_string());
        self
    }

    pub fn warp_size(mut self, w: u32) -> Self {
        self.warp_size = Some(w);
        self
    }

    /// `param NAME = VALUE`.
    pub fn param(mut self, name: &str, value: i64) -> Self {
        self.params.push((name.to_string(), value));
        self
    }

    /// The rest of a `barrier` line: `"full[STAGES] count 1"`, `"step count 2 completion rot"`.
    pub fn barrier(mut self, decl: &str) -> Self {
        self.decls.push(format!("barrier {decl}"));
        self
    }

    /// The rest of a `buffer` line: `"slot[STAGES] bytes 256"`.
    pub fn buffer(mut self, decl: &str) -> Self {
        self.decls.push(format!("buffer {decl}"));
        self
    }

    /// `var NAME = VALUE`.
    pub fn var(mut self, name: &str, init: i64) -> Self {
        self.decls.push(format!("var {name} = {init}"));
        self
    }

    /// `completion NAME { BODY }`.
    pub fn completion(mut self, name: &str, body: &str) -> Self {
        self.completions.push((name.to_string(), body.to_string()));
        self
    }

    /// `role NAME[COUNT] { BODY }`; the body is statements, one per line or `;`-separated.
    pub fn role(mut self, name: &str, count: u32, body: &str) -> Self {
        self.roles.push((name.to_string(), count, body.to_string()));
        self
    }

    /// The `.phase` text.
    pub fn source(&self) -> String {
        let mut s = format!("protocol {}\n", self.name);
        if let Some(e) = &self.expect {
            s.push_str(&format!("expect {e}\n"));
        }
        if let Some(w) = self.warp_size {
            s.push_str(&format!("warp_size {w}\n"));
        }
        for (k, v) in &self.params {
            s.push_str(&format!("param {k} = {v}\n"));
        }
        s.push('\n');
        for d in &self.decls {
            s.push_str(d);
            s.push('\n');
        }
        for (n, b) in &self.completions {
            s.push_str(&format!("completion {n} {{ {b} }}\n"));
        }
        for (n, c, b) in &self.roles {
            s.push_str(&format!("\nrole {n}[{c}] {{\n"));
            for line in b.lines() {
                s.push_str("  ");
                s.push_str(line.trim());
                s.push('\n');
            }
            s.push_str("}\n");
        }
        s
    }

    /// Parse, check and lower the text.
    pub fn build(&self) -> Result<Loaded, String> {
        parse_spec(&format!("<{}>", self.name), &self.source(), &[])
    }
}

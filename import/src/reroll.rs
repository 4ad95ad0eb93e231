//! Loops back from straight-line rounds. The per-thread run unrolls every loop (the compiler
//! has usually unrolled the constant ones already), so the importer finds them again in its
//! output: K consecutive blocks of statements from the same source lines, alike but for their
//! integers, where each integer is a small function of the round (`r`, `r % 2`,
//! `(r / 2) % 2`, `3 + 2 * r`), become `for r in 0..K { ... }`. Every value is checked against
//! every round, so the loop means exactly the rounds it replaces.

use std::fmt::Write;

/// One top-level statement of a role (or one `elect()` block): lines of (indent, text, origin).
#[derive(Clone, Debug)]
pub struct Item {
    pub lines: Vec<(usize, String, Option<String>)>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Text(String),
    Int(i64),
    /// A local the importer named (`t3` a token, `e2` an elect result): renamed per round.
    Local(char, i64),
}

/// A line split into its text, integers and importer-named locals.
fn parts(s: &str) -> Vec<Part> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        let prev_ident = i > 0 && ((b[i - 1] as char).is_ascii_alphanumeric() || b[i - 1] == b'_');
        if (c == 't' || c == 'e') && !prev_ident && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
            let mut j = i + 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let ends = j == b.len() || !((b[j] as char).is_ascii_alphanumeric() || b[j] == b'_');
            if ends {
                out.push(Part::Text(std::mem::take(&mut text)));
                out.push(Part::Local(c, s[i + 1..j].parse().unwrap_or(0)));
                i = j;
                continue;
            }
        }
        if c.is_ascii_digit() && !prev_ident && !(c == '0' && b.get(i + 1) == Some(&b'x')) {
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            out.push(Part::Text(std::mem::take(&mut text)));
            out.push(Part::Int(s[i..j].parse().unwrap_or(0)));
            i = j;
            continue;
        }
        if c == '0' && b.get(i + 1) == Some(&b'x') {
            while i < b.len() && (b[i] as char).is_ascii_alphanumeric() {
                text.push(b[i] as char);
                i += 1;
            }
            continue;
        }
        text.push(c);
        i += 1;
    }
    out.push(Part::Text(text));
    out
}

/// The shape of a line: everything but its integers and the numbers of its locals.
fn shape(line: &(usize, String, Option<String>)) -> (usize, Vec<String>, Option<String>) {
    let p = parts(&line.1)
        .into_iter()
        .map(|p| match p {
            Part::Text(t) => t,
            Part::Int(_) => "#".into(),
            Part::Local(c, _) => format!("{c}@"),
        })
        .collect();
    (line.0, p, line.2.clone())
}

/// An expression in `r` that gives `vals[r]` for every round, smallest family first.
fn fit(vals: &[i64]) -> Option<String> {
    let k = vals.len() as i64;
    let v0 = vals[0];
    if vals.iter().all(|&v| v == v0) {
        return Some(v0.to_string());
    }
    let at = |f: &dyn Fn(i64) -> i64| (0..k).all(|r| f(r) == vals[r as usize]);
    let b = vals[1] - v0;
    if at(&|r| v0 + b * r) {
        let term = if b == 1 { "r".to_string() } else { format!("{b} * r") };
        return Some(if v0 == 0 { term } else { format!("{v0} + {term}") });
    }
    let shifted = |c: i64| if c == 0 { "r".to_string() } else { format!("(r + {c})") };
    for m in 2..=k.min(16) {
        for c in 0..m {
            // d + a * ((r + c) % m)
            let base = (c) % m;
            let a_opt = (0..k).find(|&r| (r + c) % m != base).map(|r| {
                let x = (r + c) % m - base;
                (vals[r as usize] - v0, x)
            });
            if let Some((dv, dx)) = a_opt {
                if dx != 0 && dv % dx == 0 {
                    let a = dv / dx;
                    let d = v0 - a * base;
                    if at(&|r| d + a * ((r + c) % m)) {
                        let e = format!("{} % {m}", shifted(c));
                        let e = if a == 1 { e } else { format!("{a} * ({e})") };
                        return Some(if d == 0 { e } else { format!("{d} + {e}") });
                    }
                }
            }
        }
    }
    for dv in 2..=k.min(16) {
        for c in 0..2 * dv {
            if at(&|r| ((r + c) / dv) % 2) {
                return Some(format!("({} / {dv}) % 2", shifted(c)));
            }
            if at(&|r| v0 - c / dv + (r + c) / dv) {
                let d = v0 - c / dv;
                let e = format!("{} / {dv}", shifted(c));
                return Some(if d == 0 { e } else { format!("{d} + {e}") });
            }
        }
    }
    None
}

/// Blocks `items[p + L*j .. p + L*(j+1)]` for j < k as one loop body, if they fit.
fn try_loop(items: &[Item], p: usize, l: usize, k: usize) -> Option<Vec<(usize, String, Option<String>)>> {
    let block = |j: usize| {
        items[p + l * j..p + l * (j + 1)]
            .iter()
            .flat_map(|it| it.lines.iter())
            .collect::<Vec<_>>()
    };
    let first = block(0);
    let shapes: Vec<_> = first.iter().map(|x| shape(x)).collect();
    let mut rounds = Vec::with_capacity(k);
    for j in 0..k {
        let b = block(j);
        if b.len() != first.len() || b.iter().map(|x| shape(x)).collect::<Vec<_>>() != shapes {
            return None;
        }
        rounds.push(b.iter().map(|x| parts(&x.1)).collect::<Vec<_>>());
    }
    // the locals a round names must be its own (first appearance order, same in every round)
    let mut names_per_round = Vec::new();
    for round in &rounds {
        let mut seen: Vec<(char, i64)> = Vec::new();
        for line in round {
            for p in line {
                if let Part::Local(c, n) = p {
                    if !seen.contains(&(*c, *n)) {
                        seen.push((*c, *n));
                    }
                }
            }
        }
        names_per_round.push(seen);
    }
    let mut body = Vec::new();
    for (li, line) in first.iter().enumerate() {
        let mut text = String::new();
        for (pi, part) in rounds[0][li].iter().enumerate() {
            match part {
                Part::Text(t) => text.push_str(t),
                Part::Int(_) => {
                    let vals: Vec<i64> = rounds
                        .iter()
                        .map(|r| match r[li][pi] {
                            Part::Int(v) => v,
                            _ => 0,
                        })
                        .collect();
                    text.push_str(&fit(&vals)?);
                }
                Part::Local(c, n) => {
                    let idx = names_per_round[0].iter().position(|x| *x == (*c, *n))?;
                    for (j, r) in rounds.iter().enumerate() {
                        let Part::Local(c2, n2) = r[li][pi] else { return None };
                        if names_per_round[j].iter().position(|x| *x == (c2, n2)) != Some(idx) {
                            return None;
                        }
                    }
                    let _ = write!(text, "r{c}{idx}");
                }
            }
        }
        body.push((line.0 + 1, text, line.2.clone()));
    }
    Some(body)
}

/// The locals the items name.
fn locals(items: &[Item]) -> Vec<(char, i64)> {
    items
        .iter()
        .flat_map(|it| it.lines.iter())
        .flat_map(|l| parts(&l.1))
        .filter_map(|p| match p {
            Part::Local(c, n) => Some((c, n)),
            _ => None,
        })
        .collect()
}

fn push_line(out: &mut String, indent: usize, text: &str, origin: &Option<String>) {
    let pad = "  ".repeat(indent + 1);
    match origin {
        Some(o) => {
            let w = 54usize.saturating_sub(pad.len());
            let _ = writeln!(out, "{pad}{text:<w$} // from {o}");
        }
        None => {
            let _ = writeln!(out, "{pad}{text}");
        }
    }
}

/// The items as role-body text, with rounds folded into `for` loops where they fit (also
/// inside an `elect()` block: the elected lane's own loop).
pub fn render(items: &[Item]) -> String {
    let mut out = String::new();
    render_at(items, 0, &mut out);
    out
}

fn render_at(items: &[Item], base: usize, out: &mut String) {
    let mut p = 0;
    while p < items.len() {
        let mut best: Option<(usize, usize, Vec<(usize, String, Option<String>)>)> = None;
        let rest = items.len() - p;
        for l in 1..=rest / 2 {
            let mut k = rest / l;
            while k >= 2 {
                if best.as_ref().is_some_and(|b| b.0 * b.1 >= l * k) {
                    break;
                }
                // a local named in the rounds must not be used after them
                let inside = locals(&items[p..p + l * k]);
                let outside: Vec<_> = locals(&items[p + l * k..]).into_iter().chain(locals(&items[..p])).collect();
                if !inside.iter().any(|x| outside.contains(x)) {
                    if let Some(body) = try_loop(items, p, l, k) {
                        best = Some((l, k, body));
                        break;
                    }
                }
                k -= 1;
            }
        }
        match best {
            Some((l, k, body)) => {
                push_line(out, base, &format!("for r in 0..{k} {{"), &None);
                for (ind, text, o) in &body {
                    push_line(out, base + ind, text, o);
                }
                push_line(out, base, "}", &None);
                p += l * k;
            }
            None => {
                let lines = &items[p].lines;
                let block = lines.len() > 3 && lines[1].1.starts_with("if ") && lines[2..lines.len() - 1].iter().all(|l| l.0 == 1);
                if block {
                    // an elect() block: its statements may hold a loop of their own
                    let inner: Vec<Item> = lines[2..lines.len() - 1]
                        .iter()
                        .map(|(_, t, o)| Item {
                            lines: vec![(0, t.clone(), o.clone())],
                        })
                        .collect();
                    push_line(out, base, &lines[0].1, &lines[0].2);
                    push_line(out, base, &lines[1].1, &lines[1].2);
                    render_at(&inner, base + 1, out);
                    push_line(out, base, "}", &None);
                } else {
                    for (ind, text, o) in lines {
                        push_line(out, base + ind, text, o);
                    }
                }
                p += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_index_and_phase_bit_are_found_again() {
        assert_eq!(fit(&[0, 1, 0, 1]).as_deref(), Some("r % 2"));
        assert_eq!(fit(&[0, 0, 1, 1]).as_deref(), Some("(r / 2) % 2"));
        assert_eq!(fit(&[1, 1, 0, 0]).as_deref(), Some("((r + 2) / 2) % 2"));
        assert_eq!(fit(&[3, 5, 7]).as_deref(), Some("3 + 2 * r"));
        assert_eq!(fit(&[4, 4]).as_deref(), Some("4"));
    }

    #[test]
    fn rounds_become_a_loop() {
        let item = |s: &str| Item {
            lines: vec![(0, s.to_string(), Some("k.cu:9".into()))],
        };
        let items: Vec<Item> = (0..4)
            .flat_map(|r| {
                [
                    item(&format!("wait_parity(full[{}], {})", r % 2, (r / 2) % 2)),
                    item(&format!("arrive(empty[{}])", r % 2)),
                ]
            })
            .collect();
        let text = render(&items);
        assert!(
            text.starts_with("  for r in 0..4 {\n    wait_parity(full[r % 2], (r / 2) % 2)"),
            "{text}"
        );
    }
}

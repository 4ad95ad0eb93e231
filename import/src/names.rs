//! Spec names for PTX symbols: `_ZZ8tma_ringE4slot` (a function-local `__shared__` array) is
//! `slot` in the spec; a name the `.phase` language reserves gets a `_smem` suffix.

/// The source-level name of a symbol: the last component of an Itanium local-static name,
/// else the symbol itself with characters the language does not allow replaced.
pub fn demangle(sym: &str) -> String {
    if let Some(rest) = sym.strip_prefix("_ZZ") {
        // _ZZ <encoding> E <len><name> [_<discriminator>]
        if let Some(e) = rest.rfind(|c: char| c == 'E') {
            let tail = &rest[e + 1..];
            let digits: String = tail.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse::<usize>() {
                if let Some(name) = tail.get(digits.len()..digits.len() + n) {
                    return sanitize(name);
                }
            }
        }
    }
    if let Some(rest) = sym.strip_prefix("_ZN") {
        // _ZN <len><name>... (E | I <template args>): a namespace member, by its last name
        let rest = rest.trim_start_matches(['K', 'V', 'r']);
        let (mut at, mut last) = (0, None);
        loop {
            let digits: String = rest[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
            let Ok(n) = digits.parse::<usize>() else { break };
            let Some(name) = rest.get(at + digits.len()..at + digits.len() + n) else {
                break;
            };
            last = Some(name);
            at += digits.len() + n;
        }
        if let Some(name) = last {
            return sanitize(name);
        }
    }
    if let Some(rest) = sym.strip_prefix("_Z") {
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let Ok(n) = digits.parse::<usize>() {
            if let Some(name) = rest.get(digits.len()..digits.len() + n) {
                return sanitize(name);
            }
        }
    }
    sanitize(sym)
}

fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 's');
    }
    if phasecheck_model::lang::parser::is_reserved(&out) {
        out.push_str("_smem");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn local_statics_keep_their_source_names() {
        assert_eq!(super::demangle("_ZZ8tma_ringE4slot"), "slot");
        assert_eq!(super::demangle("_ZZ8tma_ringE5empty"), "empty");
        assert_eq!(super::demangle("smem$1"), "smem_1");
    }

    #[test]
    fn namespace_members_keep_their_last_name() {
        assert_eq!(super::demangle("_ZN9deep_gemm11smem_bufferE"), "smem_buffer");
        assert_eq!(
            super::demangle("_ZN9deep_gemm19sm90_bf16_gemm_implILN4cute4UMMA5MajorE0EEEvPi"),
            "sm90_bf16_gemm_impl"
        );
    }
}

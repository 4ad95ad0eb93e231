//! Files a user hands us, and text that reaches a terminal: the one I/O layer every command uses.
//!
//! Inputs (specs, traces, results files) are opened without blocking and refused unless they are
//! regular files under a size cap, so a FIFO or `/dev/zero` named where a file is expected is bad
//! input (exit 2), not a hang or an unbounded read. Outputs that replace a user's file are written
//! to a temporary file beside it and renamed over it, so a full disk or a crash leaves either the
//! old file or the new one, never a truncated mix. Strings that came from files (a trace's
//! messages, a results file's fields) are escaped before they are printed, so a crafted file
//! cannot send terminal control sequences.

use std::borrow::Cow;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// Largest trace or results file read: the library's largest trace is a few hundred KiB, and a
/// results file of the whole suite is ~10 MiB; past this a file is not one we wrote.
pub const MAX_DATA_BYTES: u64 = 64 << 20;

/// Read a regular file of at most `cap` bytes. `what` names the file in messages (the path as
/// the user wrote it). Errors are one sentence, without a trailing newline.
pub fn read_regular(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let cannot = |e: std::io::Error| format!("cannot read {what}: {e}");
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    let meta = f.metadata().map_err(cannot)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file (a FIFO, socket or device)"
        };
        return Err(format!("cannot read {what}: it is {kind}; name a regular file"));
    }
    if meta.len() > cap {
        return Err(format!(
            "{what} is {} bytes, larger than the {} bytes such a file may have",
            meta.len(),
            cap
        ));
    }
    let mut bytes = Vec::new();
    f.take(cap + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > cap {
        return Err(format!("{what} grew past {cap} bytes while it was read"));
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String, String> {
    let bytes = read_regular(path, cap, what)?;
    String::from_utf8(bytes).map_err(|e| format!("{what} is not UTF-8 text (byte {} is not)", e.utf8_error().valid_up_to()))
}

/// Replace `path` with `bytes` atomically: written to a temporary file in the same folder,
/// synced, then renamed over `path`. On any error the temporary file is removed and `path` is
/// left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        // Keep the permissions of the file being replaced.
        if let Ok(m) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, m.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `s` with every control character but newline and tab written as a visible escape (`\u{1b}`),
/// and the Unicode controls that reorder or hide text (bidirectional overrides, zero-width
/// marks) too, so that text from a file prints as what it is.
pub fn escape_for_terminal(s: &str) -> Cow<'_, str> {
    fn hostile(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    }
    if !s.chars().any(hostile) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hostile(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("phasecheck-io-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        let d = scratch("fifo");
        let p = d.join("spec.phase");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&p, 1024, "spec.phase").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_without_reading_it() {
        let d = scratch("cap");
        let p = d.join("big.json");
        std::fs::write(&p, vec![b'x'; 2048]).unwrap();
        assert!(read_regular(&p, 1024, "big.json").unwrap_err().contains("larger than"));
        assert_eq!(read_regular(&p, 2048, "big.json").unwrap().len(), 2048);
        assert!(read_regular(&d, 2048, "folder").unwrap_err().contains("a folder"));
    }

    #[test]
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let d = scratch("atomic");
        let p = d.join("a.phase");
        std::fs::write(&p, "old").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_atomic_write_keeps_the_old_file() {
        let d = scratch("atomic-fail");
        let p = d.join("missing-folder").join("a.phase");
        assert!(write_atomic(&p, b"new").is_err());
        let q = d.join("b.phase");
        std::fs::write(&q, "old").unwrap();
        // A folder where the temporary file would go: creating it fails, the file is untouched.
        std::fs::create_dir(d.join(format!(".b.phase.{}.tmp", std::process::id()))).unwrap();
        assert!(write_atomic(&q, b"new").is_err());
        assert_eq!(std::fs::read_to_string(&q).unwrap(), "old");
    }

    #[test]
    fn a_data_file_one_byte_past_64_mib_is_refused_unread() {
        // The cap on traces and results files is 64 MiB (`MAX_DATA_BYTES`'s doc says why). A sparse
        // file, so that the test allocates nothing.
        let d = scratch("cap");
        let p = d.join("big.json");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(64 * 1024 * 1024 + 1).unwrap();
        assert!(read_regular(&p, MAX_DATA_BYTES, "big.json").is_err());
    }

    #[test]
    fn a_write_that_fails_after_its_temporary_exists_removes_the_temporary() {
        let d = scratch("atomic-rename");
        // A non-empty folder where the file should be: the temporary is written, the rename over
        // the folder fails, and nothing of the attempt is left beside it.
        let p = d.join("a.phase");
        std::fs::create_dir_all(p.join("inside")).unwrap();
        assert!(write_atomic(&p, b"new").is_err());
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("a.phase")]);
    }

    #[test]
    fn terminal_escapes_are_made_visible_and_plain_text_is_kept() {
        assert_eq!(escape_for_terminal("wait at line 3\n\tok"), "wait at line 3\n\tok");
        let e = escape_for_terminal("x\u{1b}]0;owned\u{7}\u{1b}[2Jy\u{202e}");
        assert_eq!(e, "x\\u{1b}]0;owned\\u{7}\\u{1b}[2Jy\\u{202e}");
        assert!(!e.contains('\u{1b}'));
    }
}

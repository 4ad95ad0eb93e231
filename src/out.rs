//! The CLI's standard output and error. `println!` panics when stdout cannot be written (a closed
//! pipe under `| head`, `> /dev/full`); a command that cannot deliver its output must instead
//! stop quietly with its own exit status, [`OUTPUT_LOST`], documented in docs/interfaces.md.
//! Every print of the CLI goes through [`say!`]/[`sayln!`] (stdout) or [`note!`]/[`noteln!`]
//! (stderr, where a failure is ignored: there is nowhere left to report it).

use std::io::Write as _;

/// The exit status of a command whose output could not be written.
pub const OUTPUT_LOST: u8 = 6;

/// Write `s` to stdout and flush, or end the process with [`OUTPUT_LOST`]. Control characters
/// are made visible ([`phasecheck_model::io::escape_for_terminal`]): what the CLI prints quotes
/// traces, results files and specs, and none of its own text holds any.
pub fn stdout(s: &str) {
    stdout_raw(&phasecheck_model::io::escape_for_terminal(s))
}

/// [`stdout`] without escaping, for JSON (serde already escapes what JSON must, and an escape
/// of ours inside a JSON string would not be JSON).
pub fn stdout_raw(s: &str) {
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        lost(&e)
    }
}

/// Write `s` to stderr, control characters made visible; a failure is ignored.
pub fn stderr(s: &str) {
    let s = phasecheck_model::io::escape_for_terminal(s);
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(s.as_bytes()).and_then(|_| e.flush());
}

fn lost(e: &std::io::Error) -> ! {
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        stderr(&format!("phasecheck: the output could not be written: {e}\n"));
    }
    std::process::exit(OUTPUT_LOST as i32)
}

/// The backstop for prints this crate does not make itself (a library's progress line): the
/// standard library's "failed printing to stdout" panic ends the process as [`lost`] does,
/// instead of as a crash with exit 101. Any other panic keeps the default report.
pub fn install_panic_backstop() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") {
            if !msg.contains("Broken pipe") {
                stderr(&format!("phasecheck: the output could not be written: {msg}\n"));
            }
            std::process::exit(OUTPUT_LOST as i32);
        }
        default(info)
    }));
}

/// Flush stdout at the end of a command (a block-buffered stdout may still hold output).
pub fn finish() {
    if let Err(e) = std::io::stdout().lock().flush() {
        lost(&e)
    }
}

#[macro_export]
macro_rules! say {
    ($($t:tt)*) => { $crate::out::stdout(&format!($($t)*)) };
}
#[macro_export]
macro_rules! sayln {
    () => { $crate::out::stdout("\n") };
    ($($t:tt)*) => { $crate::out::stdout(&(format!($($t)*) + "\n")) };
}
#[macro_export]
macro_rules! note {
    ($($t:tt)*) => { $crate::out::stderr(&format!($($t)*)) };
}
#[macro_export]
macro_rules! noteln {
    () => { $crate::out::stderr("\n") };
    ($($t:tt)*) => { $crate::out::stderr(&(format!($($t)*) + "\n")) };
}

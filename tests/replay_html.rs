//! The HTML report opens in a real headless Chromium with no console errors and shows a lane for
//! every thread. Skipped (passes with a note) where no chromium is installed; CI installs
//! Debian's `chromium` package to run it.

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chromium() -> Option<String> {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Some(c.to_string());
        }
    }
    None
}

#[test]
fn wrong_parity_report_loads_in_headless_chromium_and_shows_every_lane() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("phasecheck-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let out = Command::new(BIN)
        .args(["check", "specs/mistakes/consumer_wrong_parity.phase", "--html"])
        .arg(&html)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        !page.contains("http://")
            || page
                .matches("http://")
                .all(|_| page.contains("xmlns=\"http://www.w3.org/2000/svg\""))
    );
    assert!(
        !page.contains("<link") && !page.contains("src=\""),
        "self-contained: no external resources"
    );
    let profile = dir.join("profile");
    let out = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    assert!(!log.contains("Uncaught") && !log.contains("ERROR:CONSOLE"), "console errors: {log}");
    // The inline script ran to its end and counted the timelines.
    let sections = page.matches("<section class=\"trace\"").count();
    assert!(sections >= 1);
    assert!(
        dom.contains(&format!("data-ready=\"{sections}\"")),
        "script did not finish: {}",
        &dom[..dom.len().min(400)]
    );
    // Every thread of the CTA has a lane in every timeline.
    for lane in ["producer#0", "consumer#0", "copies"] {
        let n = dom.matches(&format!("class=\"lane\" data-lane=\"{lane}\"")).count();
        assert!(n >= 1, "lane {lane} missing");
    }
    assert_eq!(
        dom.matches("class=\"lane\" data-lane=\"producer#0\"").count(),
        sections,
        "a producer lane in every timeline"
    );
    assert_eq!(dom.matches("class=\"lane\" data-lane=\"consumer#0\"").count(), sections);
    // Each timeline has a jump link, and the script scrolled the step violations into view.
    assert_eq!(dom.matches("<a class=\"jump\"").count(), sections);
    assert!(
        dom.matches("data-jumped=\"1\"").count() >= 1,
        "no timeline was scrolled to its violation"
    );
}

/// Without a browser: the page carries the root cause, a legend of init counts, jump links, and
/// folds threads that never step into one lane.
#[test]
fn report_folds_idle_threads_and_shows_counts_and_cause() {
    let dir = std::env::temp_dir().join(format!("phasecheck-html-fold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("idle.phase");
    std::fs::write(
        &spec,
        "protocol idle_threads\nbarrier flag count 1\nbarrier pair[2] count 2\nrole p[1] {\n  arrive(flag)\n  arrive(flag)\n}\nrole idle[4] { work }\n",
    )
    .unwrap();
    let html = dir.join("r.html");
    let out = Command::new(BIN).arg("check").arg(&spec).arg("--html").arg(&html).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(r#"class="lane idle" data-lane="idle: idle#0 … idle#3 (4)""#),
        "{page}"
    );
    assert!(!page.contains(r#"data-lane="idle#0""#));
    assert!(page.contains(r#"data-lane="p#0""#));
    assert!(
        page.contains("<b>flag</b> count 1") && page.contains("<b>pair[*]</b> count 2"),
        "legend of init counts"
    );
    assert!(
        page.contains("<b>root cause</b>: missing-wait at line 6 `arrive(flag)`"),
        "the root cause"
    );
    assert!(
        page.contains(r##"<a class="jump" href="#t0-s2""##),
        "jump link to the violating step"
    );
}

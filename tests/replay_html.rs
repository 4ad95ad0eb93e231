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

/// What the test adds to a copy of the page, after the page's own script: the bounding boxes
/// of the violation's mark and of every row label, the label column's box and the viewport,
/// written into the DOM for `--dump-dom` to carry out.
const MEASURE: &str = r#"<script>
(function(){
  function box(e){var r=e.getBoundingClientRect();return [r.left,r.top,r.right,r.bottom].map(Math.round).join(',');}
  var scroll=document.getElementById('scroll-0');
  var step=scroll.getAttribute('data-violation');
  var svg=document.getElementById('timeline-0');
  var mark=svg.querySelector('.mark[data-step="'+step+'"]')||svg.querySelector('.mark.stuck');
  var col=document.getElementById('labels-0');
  var out=document.createElement('pre');out.id='geometry';
  var lines=['viewport '+window.innerWidth+','+window.innerHeight,'mark '+box(mark),'column '+box(col),'scroll '+box(scroll)];
  col.querySelectorAll('text[data-label]').forEach(function(t){
    lines.push('label '+box(t)+' '+Math.ceil(t.getComputedTextLength())+' '+t.getAttribute('data-label'));
  });
  out.textContent=lines.join('\n');
  document.body.appendChild(out);
})();
</script>"#;

/// A rectangle `left,top,right,bottom` in CSS pixels.
fn rect(s: &str) -> [f64; 4] {
    let v: Vec<f64> = s.split(',').map(|x| x.parse().unwrap()).collect();
    [v[0], v[1], v[2], v[3]]
}

/// A long trace (the ping-pong GEMM whose consumer starts at the wrong phase: two warpgroups,
/// a producer, copies, four barrier bands) opens at its violation: in the first 1280x800
/// viewport the violating step's mark is visible, and beside it every row label whose row is
/// on screen, whole (pinned in their column while the steps scroll, never cut). The screenshot
/// of that first viewport is kept under target/ for a person to look at.
#[test]
fn a_long_trace_opens_at_its_violation_with_the_row_labels_in_view() {
    let Some(browser) = chromium() else {
        eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("phasecheck-html-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let out = Command::new(BIN)
        .args(["check", "benches/realshape/pingpong_gemm_bug_start_phase.phase", "--html"])
        .arg(&html)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let measured = dir.join("measured.html");
    std::fs::write(&measured, page.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    let run = |extra: &[String], file: &PathBuf| {
        let o = Command::new(&browser)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .arg("--window-size=1280,800")
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .args(extra)
            .arg(format!("file://{}", file.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let dom = run(&["--dump-dom".to_string()], &measured);
    let at = dom.find("<pre id=\"geometry\">").expect("the measuring script ran") + "<pre id=\"geometry\">".len();
    let geometry = dom[at..at + dom[at..].find("</pre>").unwrap()].replace("&amp;", "&");
    let mut view = [0.0; 2];
    let (mut mark, mut column) = ([0.0; 4], [0.0; 4]);
    let mut labels = Vec::new();
    for l in geometry.lines() {
        let mut w = l.splitn(4, ' ');
        match w.next().unwrap() {
            "viewport" => {
                let v: Vec<f64> = w.next().unwrap().split(',').map(|x| x.parse().unwrap()).collect();
                view = [v[0], v[1]];
            }
            "mark" => mark = rect(w.next().unwrap()),
            "column" => column = rect(w.next().unwrap()),
            "label" => {
                let r = rect(w.next().unwrap());
                let len: f64 = w.next().unwrap().parse().unwrap();
                labels.push((r, len, w.next().unwrap_or("").to_string()));
            }
            _ => {}
        }
    }
    assert!(view[0] <= 1280.0 && view[1] <= 800.0 && view[1] > 0.0, "{geometry}");
    let inside = |r: [f64; 4]| r[0] >= 0.0 && r[1] >= 0.0 && r[2] <= view[0] && r[3] <= view[1];
    assert!(inside(mark), "the violation's mark is outside the first viewport:\n{geometry}");
    assert!(mark[0] >= column[2], "the mark is under the label column:\n{geometry}");
    assert!(labels.len() >= 4, "{geometry}");
    let mut on_screen = 0;
    for (r, len, name) in &labels {
        // Whole: the text's own length fits between the label's left edge and the column's
        // right edge, and the column itself is not scrolled or clipped away.
        assert!(r[0] >= column[0] && r[0] + len <= column[2], "label `{name}` is cut:\n{geometry}");
        if r[3] > 0.0 && r[1] < view[1] {
            on_screen += 1;
            assert!(r[0] >= 0.0 && r[0] + len <= view[0], "label `{name}` is off screen:\n{geometry}");
        }
    }
    // The mark's own row has its label in view.
    let mid = (mark[1] + mark[3]) / 2.0;
    assert!(
        labels.iter().any(|(r, _, _)| r[1] - 25.0 <= mid && mid <= r[3] + 25.0),
        "no label on the mark's row:\n{geometry}"
    );
    assert!(on_screen >= 3, "{geometry}");
    // The first viewport as a picture, for review (docs/wrong-parity-report.png is one).
    let png = root().join("target/html-first-viewport.png");
    run(&[format!("--screenshot={}", png.display())], &html);
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 1280, "screenshot width");
    assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 800, "screenshot height");
}

/// The text swimlanes name each other kind a step raises once, with how often: the 32 lanes of
/// a warp arriving early on a count-1 barrier raise one missing wait each, shown as `×31`, not
/// the same note 31 times.
#[test]
fn swimlanes_collapse_repeated_notes() {
    let out = Command::new(BIN)
        .args(["check", "benches/realshape/pingpong_gemm_bug_warp_arrives.phase", "--swimlanes"])
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("! also missing-wait; ! also missing-wait"), "{text}");
    assert!(text.contains("! also missing-wait ×"), "{text}");
}

//! A small parser of the Prometheus text format for the status tests, and promtool when
//! installed.

use std::process::Stdio;

/// One sample: metric name, labels, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Parses Prometheus text: every sample belongs to a family declared with HELP and TYPE,
/// names and labels are well-formed, values are numbers. Returns (name, labels, value).
pub fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut typed: std::collections::HashMap<String, String> = Default::default();
    let mut samples = Vec::new();
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().expect("name");
            assert!(name_ok(name), "bad HELP line {line:?}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().expect("name"), parts.next().expect("type"));
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                typed.insert(name.to_owned(), kind.to_owned()).is_none(),
                "TYPE twice: {line}"
            );
        } else {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("bad line {line:?}"));
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            let (name, labels) = match series.split_once('{') {
                None => (series, Vec::new()),
                Some((name, rest)) => (
                    name,
                    parse_labels(rest.strip_suffix('}').expect("closing brace")),
                ),
            };
            assert!(name_ok(name), "bad name in {line:?}");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
                })
                .unwrap_or(name);
            assert!(typed.contains_key(family), "sample before its TYPE: {line}");
            samples.push((name.to_owned(), labels, value));
        }
    }
    samples
}

fn parse_labels(mut text: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    while !text.is_empty() {
        let (key, rest) = text.split_once("=\"").expect("label=\"value\"");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    c => panic!("bad escape \\{c}"),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.to_owned(), value));
        text = rest[end + 1..].trim_start_matches(',');
    }
    labels
}

pub fn sample(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.2)
}

/// Runs `promtool check metrics` on `text` when promtool is installed (the Debian package
/// `prometheus`; `scripts/promtool-check.sh` does the same for a running daemon).
pub fn promtool(text: &str) {
    let how = "bash scripts/test-tools.sh installs the promtool binary (as root)";
    if !crate::util::require(
        crate::util::runs("promtool", &["--version"]),
        "promtool",
        how,
    ) {
        return;
    }
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

//! Integration tests for `import crontab`, `completions` and `manpage`: the real binary on
//! crontab samples in tests/data/crontab, the output loaded as configuration, and imported or
//! rewritten jobs run for real to prove the `%` standard input survives; the bash completion
//! script driven in a real bash as bash-completion calls it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use heartbeat_agent::config::{Config, Job, JobAction};

use crate::util::{self, Home};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/crontab")
        .join(name)
}

fn agent(args: &[&str]) -> Output {
    let home = Home::new();
    home.agent().args(args).output().unwrap()
}

fn import(file: &str, extra: &[&str]) -> Output {
    let path = sample(file);
    let mut args = vec!["import", "crontab", path.to_str().unwrap()];
    args.extend(extra);
    agent(&args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The `SOURCE:LINE: ...` problem lines of stderr (without the summary line).
fn problems(out: &Output) -> Vec<String> {
    text(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("heartbeat-agent: "))
        .map(str::to_owned)
        .collect()
}

/// The minimal configuration the imported tables are appended to.
const PREFIX: &str = "[agent]\ntimezone = \"UTC\"\n\n";

/// Loads `PREFIX + jobs` as the daemon would; panics with every problem when it does not load.
fn load(jobs: &str) -> Vec<std::sync::Arc<Job>> {
    let text = format!("{PREFIX}{jobs}");
    match Config::from_text(Path::new("imported.toml"), &text) {
        Ok(loaded) => loaded.config.jobs,
        Err(err) => panic!("imported jobs do not load: {err}\n{text}"),
    }
}

fn script(job: &Job) -> (&Path, &str) {
    match &job.action {
        JobAction::Shell { program, script } => (program.as_path(), script.as_str()),
        other => panic!("job {} is not a shell job: {other:?}", job.name),
    }
}

/// Runs `program -c script` with `stdin` and returns its stdout.
fn sh(program: &Path, script: &str, stdin: &str) -> String {
    let mut child = Command::new(program)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    text(&child.wait_with_output().unwrap().stdout)
}

#[test]
fn user_crontab_every_syntax_becomes_jobs_that_load() {
    let out = import("user.crontab", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let file = sample("user.crontab");
    assert_eq!(
        problems(&out),
        [format!(
            "{}:8: MAILTO is not translated: the agent does not mail job output (failures show \
             in status and on the heartbeat check)",
            file.display()
        )]
    );
    let jobs = load(&text(&out.stdout));
    let got: Vec<(&str, &str)> = jobs
        .iter()
        .map(|j| (j.name.as_str(), j.schedule.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("backup.sh", "0,30 * * * *"),
            ("backup.sh-2", "15 2-4/2 1-15 jan-mar mon-fri"),
            ("report", "*/10 9-17 * * 1,3,5"),
            ("rotate-logs", "0 0 1 */3 sun"),
            ("echo", "5 4 * * 7"),
            ("warm-cache", "@reboot"),
            ("yearly", "@yearly"),
            ("annually", "@annually"),
            ("monthly", "@monthly"),
            ("weekly", "@weekly"),
            ("daily", "@daily"),
            ("midnight", "@midnight"),
            ("hourly", "@hourly"),
            ("date", "0 9 * * *"),
            ("mail", "30 18 * * *"),
            ("tr", "@hourly"),
        ]
    );
    let env: BTreeMap<String, String> = [
        ("EMPTY", ""),
        ("GREETING", "hello  world"),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("SINGLE", "it is \"quoted\""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for job in &jobs {
        assert_eq!(job.env, env, "job {}", job.name);
        assert_eq!(
            script(job).0,
            Path::new("/bin/bash"),
            "SHELL becomes shell_program"
        );
        let zone = if ["date", "mail", "tr"].contains(&job.name.as_str()) {
            heartbeat_agent::schedule::Zone::named("America/New_York").expect("a known zone")
        } else {
            heartbeat_agent::schedule::Zone::UTC
        };
        assert_eq!(
            job.timezone, zone,
            "CRON_TZ applies from its line on: {}",
            job.name
        );
    }
    assert_eq!(
        script(&jobs[2]).1,
        "cd /srv/app && ./bin/report > /dev/null 2>&1"
    );
    assert_eq!(script(&jobs[13]).1, "date +%Y-%m-%d >> /tmp/dates.log");
}

#[test]
fn percent_input_reaches_the_whole_imported_command() {
    let out = import("user.crontab", &[]);
    let jobs = load(&text(&out.stdout));
    let (program, mail) = script(&jobs[14]);
    // `cat` stands in for mail: the script must feed it exactly cron's standard input.
    let as_cat = mail.replace("mail -s report boss", "cat");
    assert_eq!(
        sh(program, &as_cat, ""),
        "Dear boss,\n\nthe report is %100 done.\n"
    );
    let (program, tr) = script(&jobs[15]);
    assert_eq!(sh(program, tr, "ignored"), "ABC\nDEF %GHI %done\n");
}

#[test]
fn system_crontab_user_column_becomes_user() {
    let out = import("system.crontab", &["--system"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(problems(&out).is_empty(), "{:?}", problems(&out));
    let jobs = load(&text(&out.stdout));
    let got: Vec<(&str, Option<&str>)> = jobs
        .iter()
        .map(|j| (j.name.as_str(), j.user.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("cron.hourly", Some("root")),
            ("cron.daily", Some("root")),
            ("start-queue", Some("www-data")),
            ("sync-backup", Some("backup$")),
        ]
    );
    assert_eq!(
        script(&jobs[1]),
        (
            Path::new("/bin/sh"),
            "test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )"
        )
    );
}

#[test]
fn a_user_crontab_read_as_system_reports_the_user_column() {
    let out = import("duplicates.crontab", &["--system"]);
    assert_eq!(out.status.code(), Some(0));
    let file = sample("duplicates.crontab");
    let lines = problems(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(
        lines[0],
        format!(
            "{}:1: the user column \"/usr/bin/backup\" is not a user name (letters, digits, `.`, \
             `_`, `-`); a system crontab line is `SCHEDULE USER COMMAND` (is this a user \
             crontab? then leave out --system); the line is not imported",
            file.display()
        )
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn invalid_lines_are_reported_with_file_and_line() {
    let out = import("invalid.crontab", &[]);
    assert_eq!(out.status.code(), Some(0), "the crontab was read");
    let file = sample("invalid.crontab");
    let expected = [
        "2: invalid schedule \"0 25 * * *\": hour field \"25\": value 25 out of range 0-23",
        "3: unknown schedule macro \"@fortnightly\"",
        "4: a job line needs five time fields (or an @ macro) and a command; this line has only 4",
        "5: invalid schedule \"0 0 31 2 *\"",
        "6: a job line needs five time fields",
        "7: the value of QUOTE opens a \" quote that is not closed on this line",
        "8: CRON_TZ=\"Nowhere/Special\" is not an IANA time zone",
        "9: the CRON_TZ in effect (line 8) is not a valid time zone",
        "12: the command already runs through `heartbeat-agent run` (a rewritten crontab?)",
    ];
    let lines = problems(&out);
    assert_eq!(lines.len(), expected.len(), "{lines:?}");
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(&format!("{}:{want}", file.display())),
            "{line}\ndoes not start with {want}"
        );
    }
    let jobs = load(&text(&out.stdout));
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].name, "fine");
    assert!(text(&out.stderr).contains("imported 1 job, 9 problems reported above"));
}

#[test]
fn duplicate_names_get_suffixes() {
    let out = import("duplicates.crontab", &[]);
    let names: Vec<String> = load(&text(&out.stdout))
        .into_iter()
        .map(|j| j.name.clone())
        .collect();
    assert_eq!(names, ["backup", "backup-2", "backup-3"]);
}

#[test]
fn stdin_is_read_for_dash_and_for_no_file() {
    for args in [&["import", "crontab", "-"][..], &["import", "crontab"][..]] {
        let home = Home::new();
        let mut child = home
            .agent()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = "MAILFROM=cron\n0 * * * * /bin/true\n";
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(problems(&out)[0].starts_with("<stdin>:1: MAILFROM is not translated"));
        assert_eq!(load(&text(&out.stdout))[0].name, "true");
    }
}

#[test]
fn unreadable_crontab_fails() {
    let out = agent(&["import", "crontab", "/nonexistent/crontab"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr)
        .starts_with("heartbeat-agent: cannot read the crontab /nonexistent/crontab: "));
    let out = agent(&["import", "crontab", "--rewrite"]);
    assert_eq!(out.status.code(), Some(2), "--rewrite needs --jobs-out");
    assert!(text(&out.stderr).contains("--jobs-out"));
}

/// cron's reading of a command: the part before the first bare `%` (with `\%` as `%`) and the
/// standard input after it (bare `%` as newlines), as crontab(5) describes.
fn cron_split(command: &str) -> (String, String) {
    let (mut cmd, mut input, mut in_input, mut chars) = (
        String::new(),
        String::new(),
        false,
        command.chars().peekable(),
    );
    while let Some(ch) = chars.next() {
        let out = if in_input { &mut input } else { &mut cmd };
        match ch {
            '\\' if chars.peek() == Some(&'%') => out.push(chars.next().unwrap()),
            '%' if in_input => input.push('\n'),
            '%' => in_input = true,
            _ => out.push(ch),
        }
    }
    (cmd, input)
}

#[test]
fn rewrite_wraps_jobs_and_writes_external_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let jobs_out = dir.path().join("jobs.toml");
    let bin = util::bin();
    let out = import(
        "user.crontab",
        &[
            "--rewrite",
            "--jobs-out",
            jobs_out.to_str().unwrap(),
            "--program",
            bin.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(problems(&out).len(), 1, "MAILTO is still reported");
    let original = std::fs::read_to_string(sample("user.crontab")).unwrap();
    let rewritten = text(&out.stdout);
    assert_eq!(rewritten.lines().count(), original.lines().count());
    let bin = bin.display();
    for (old, new) in original.lines().zip(rewritten.lines()) {
        let is_job = old
            .trim_start()
            .starts_with(|c: char| c.is_ascii_digit() || "*@".contains(c));
        if !is_job {
            assert_eq!(old, new, "non-job lines stay as they are");
        }
    }
    let lines: Vec<&str> = rewritten.lines().collect();
    assert_eq!(
        lines[11],
        format!(
            "15 2-4/2 1-15 jan-mar mon-fri {bin} run --job backup.sh-2 -- /bin/bash -c \
             '/usr/local/bin/backup.sh --full'"
        )
    );
    assert_eq!(
        lines[26],
        format!(
            "0 9 * * * {bin} run --job date -- /bin/bash -c 'date +\\%Y-\\%m-\\%d >> \
             /tmp/dates.log'"
        )
    );

    // The jobs are external: the daemon does not run them, nothing runs twice.
    let jobs = std::fs::read_to_string(&jobs_out).unwrap();
    let loaded = load(&jobs);
    assert_eq!(loaded.len(), 16);
    assert!(loaded.iter().all(|j| j.action == JobAction::External));

    // Run the rewritten `tr` line as cron would: the wrapper runs it, the input reaches it.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("{PREFIX}{jobs}")).unwrap();
    let tr_line = lines.iter().find(|l| l.contains("--job tr ")).unwrap();
    let (command, input) = cron_split(tr_line.strip_prefix("@hourly ").unwrap());
    let home = Home::new();
    let mut cron = Command::new("/bin/sh");
    cron.args(["-c", &command])
        .env_remove("HEARTBEAT_AGENT_API_KEY")
        .env("HEARTBEAT_AGENT_CONFIG", &config)
        .env("HOME", home.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cron.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ABC\nDEF %GHI %done\n");
}

#[test]
fn completions_cover_the_subcommands() {
    let out = agent(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let bash = text(&out.stdout);
    for sub in [
        "run",
        "schedule",
        "config",
        "import",
        "completions",
        "manpage",
    ] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = agent(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(text(&out.stdout).contains("heartbeat-agent"), "{shell}");
    }
    let out = agent(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("invalid value 'tcsh'"));
}

/// What the generated bash completion offers for `words` (the command line so far, the word
/// under the cursor last): the script sourced in a real `bash`, `COMP_WORDS` and `COMP_CWORD`
/// set and the completion function called with the arguments bash gives it (command, current
/// word, previous word), as bash-completion does on TAB.
fn bash_completes(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let prev = if cword == 0 { "" } else { words[cword - 1] };
    let driver = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={cword}\n\
         _heartbeat__agent heartbeat-agent '{}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words[cword],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &driver])
        .output()
        .expect("bash is installed (it runs the test scripts)");
    assert!(out.status.success(), "bash: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "the script sources cleanly");
    text(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completion_works_past_the_first_word() {
    let out = agent(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("heartbeat-agent.bash");
    std::fs::write(&script, &out.stdout).unwrap();

    assert_eq!(bash_completes(&script, &["heartbeat-agent", "ru"]), ["run"]);
    let run = bash_completes(&script, &["heartbeat-agent", "run", "--pi"]);
    assert_eq!(
        run,
        [
            "--ping-url",
            "--ping-url-file",
            "--ping-method",
            "--ping-timeout"
        ],
        "run --pi<TAB>"
    );
    // Two levels down, through a hyphenated subcommand name.
    let group = bash_completes(&script, &["heartbeat-agent", "api", "check-gr"]);
    assert_eq!(group, ["check-group"]);
    let get = bash_completes(&script, &["heartbeat-agent", "api", "check-group", "g"]);
    assert_eq!(get, ["get"]);
    let config = bash_completes(&script, &["heartbeat-agent", "config", "ch"]);
    assert_eq!(config, ["check"]);
}

#[test]
fn manpage_has_exit_status_environment_and_files() {
    let out = agent(&["manpage"]);
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    let at = |title: &str| {
        page.find(&format!(".SH \"{title}\"\n"))
            .unwrap_or_else(|| panic!("no {title} section in:\n{page}"))
    };
    let (exit, env, files) = (at("EXIT STATUS"), at("ENVIRONMENT"), at("FILES"));
    let options = page.find(".SH OPTIONS\n").expect("an OPTIONS section");
    let version = page.find(".SH VERSION\n").expect("a VERSION section");
    assert!(
        options < exit && exit < env && env < files && files < version,
        "man-pages(7) order"
    );
    let exit_section = &page[exit..env];
    for code in ["0", "1", "2", "78", "124", "126", "127", "130", "137"] {
        assert!(
            exit_section.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "code {code}"
        );
    }
    for var in [
        "HEARTBEAT_AGENT_CONFIG",
        "HEARTBEAT_AGENT_API_KEY",
        "HEARTBEAT_AGENT_PING_URL",
        "HEARTBEAT_AGENT_LOG",
        "STATE_DIRECTORY",
        "TZ",
    ] {
        assert!(page[env..files].contains(&format!("\\fB{var}")), "{var}");
    }
    assert!(page[files..].contains("/etc/heartbeat\\-agent/config.toml"));
    assert!(page[files..].contains("/var/lib/heartbeat\\-agent/"));
    // The written main page is the same page, sections included.
    let dir = tempfile::tempdir().unwrap();
    let out = agent(&["manpage", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let written = std::fs::read_to_string(dir.path().join("heartbeat-agent.1")).unwrap();
    assert_eq!(written, page);
}

#[test]
fn manpage_is_roff_and_documents_run() {
    let out = agent(&["manpage"]);
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    // clap_mangen defines the apostrophe string (two lines) before the title macro.
    let first_macro = page.lines().find(|l| !l.contains(".ds Aq")).unwrap();
    assert!(
        first_macro.starts_with(".TH heartbeat-agent 1"),
        "{first_macro}"
    );
    assert!(page.contains("heartbeat\\-agent\\-run(1)"), "lists run");
    let dir = tempfile::tempdir().unwrap();
    let out = agent(&["manpage", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let run = std::fs::read_to_string(dir.path().join("heartbeat-agent-run.1")).unwrap();
    assert!(run.contains(".TH heartbeat-agent-run 1") && run.contains("\\-\\-job"));
    // The synopsis shows what a user types: options, then the command; no hidden argument.
    let synopsis = run
        .lines()
        .find(|l| l.starts_with("\\fBheartbeat\\-agent run\\fR"))
        .unwrap();
    assert!(synopsis.contains("[\\fICMD\\fR]"), "{synopsis}");
    assert!(!run.contains("STRAY"), "{synopsis}");
}

//! Job names derived from crontab commands: the program that does the work (or the script an
//! interpreter runs), reduced to the config's name charset and made unique.

use std::collections::HashSet;

/// The longest job name the config accepts.
const MAX_LEN: usize = 100;

/// A program that only starts another one: the name comes from the program after it, its own
/// options (and their values) and arguments skipped.
struct Wrapper {
    /// The wrapper's program name.
    name: &'static str,
    /// Its options that take the next word as their value (`sudo -u app`).
    valued: &'static [&'static str],
    /// How many arguments of its own come before the command (`timeout 60 cmd`: 1).
    arguments: usize,
    /// Options whose value is the command itself (`su app -c 'cmd'`).
    command: &'static [&'static str],
}

impl Wrapper {
    const fn new(name: &'static str, valued: &'static [&'static str]) -> Wrapper {
        Wrapper {
            name,
            valued,
            arguments: 0,
            command: &[],
        }
    }

    /// The index of the wrapped command's first word in `words`, the wrapper's options and
    /// arguments starting at `start`.
    fn skip(&self, words: &[&str], start: usize) -> usize {
        let mut i = start;
        let mut arguments = self.arguments;
        let mut options = true;
        while let Some(word) = words.get(i) {
            if options && self.command.contains(word) {
                return i + 1;
            }
            if options && *word == "--" {
                options = false;
                i += 1;
            } else if options && word.starts_with('-') {
                i += if self.valued.contains(word) { 2 } else { 1 };
            } else if arguments > 0 {
                arguments -= 1;
                i += 1;
            } else {
                break;
            }
        }
        i
    }
}

/// The programs that only start another one.
const WRAPPERS: [Wrapper; 14] = [
    Wrapper::new(
        "sudo",
        &[
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-T",
            "-U",
            "--user",
            "--group",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--other-user",
            "--close-from",
            "--command-timeout",
        ],
    ),
    Wrapper {
        name: "su",
        valued: &["-s", "-g", "-G", "--shell", "--group", "--supp-group", "-w"],
        arguments: 1,
        command: &["-c", "--command", "--session-command"],
    },
    Wrapper::new("nice", &["-n", "--adjustment"]),
    Wrapper::new("ionice", &["-c", "-n", "--class", "--classdata"]),
    Wrapper::new("nohup", &[]),
    Wrapper {
        name: "timeout",
        valued: &["-s", "-k", "--signal", "--kill-after"],
        arguments: 1,
        command: &[],
    },
    Wrapper {
        name: "flock",
        valued: &["-w", "-E", "--timeout", "--wait", "--conflict-exit-code"],
        arguments: 1,
        command: &["-c", "--command"],
    },
    Wrapper::new("exec", &["-a"]),
    Wrapper::new(
        "env",
        &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
    ),
    Wrapper::new("command", &[]),
    Wrapper::new("time", &["-o", "-f", "--output", "--format"]),
    Wrapper::new("chronic", &[]),
    Wrapper::new("setsid", &[]),
    Wrapper::new("stdbuf", &["-i", "-o", "-e"]),
];

/// Commands that prepare or guard the real work (`cd /srv && ./run`, `test -x X || ...`).
const PRELUDES: [&str; 6] = ["cd", "test", "[", "true", ":", "sleep"];

/// Programs that run a script named by their first non-option argument.
const INTERPRETERS: [&str; 12] = [
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "python",
    "python3",
    "perl",
    "ruby",
    "php",
    "node",
    "run-parts",
];

/// Hands out unique job names.
#[derive(Debug, Default)]
pub(crate) struct Names {
    /// Names already given out.
    taken: HashSet<String>,
}

impl Names {
    /// A unique name for a job running `script`: the derived name, else with `-2`, `-3`, ...
    pub(crate) fn unique_for(&mut self, script: &str) -> String {
        let base = derive(script);
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            let suffix = format!("-{n}");
            let keep = MAX_LEN - suffix.len();
            name = format!("{}{suffix}", &base[..base.len().min(keep)]);
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// The name for a command, before making it unique: at most 100 of `[A-Za-z0-9._-]`, starting
/// with a letter or digit; `job` when nothing is left.
pub(crate) fn derive(script: &str) -> String {
    let word = program_word(script).unwrap_or_default();
    let base = word.rsplit('/').find(|part| !part.is_empty()).unwrap_or("");
    sanitize(base)
}

/// The word naming the program that does the work.
fn program_word(script: &str) -> Option<String> {
    let spaced = ["&&", "||", ";", "|", "(", ")", "{", "}"]
        .iter()
        .fold(script.to_owned(), |text, op| text.replace(op, "\n"));
    // A command made only of preludes (`/bin/true`) is named after its first one.
    (spaced.lines().find_map(|s| segment_program(s, false)))
        .or_else(|| spaced.lines().find_map(|s| segment_program(s, true)))
}

/// The program of one simple command, `None` for a prelude such as `cd DIR` unless
/// `allow_prelude`. Assignments (`LANG=C`) and wrappers (`sudo -u app`, `nice -n 10`,
/// `timeout 60`, `flock /run/lock`, `su app -c`) before it are skipped.
fn segment_program(segment: &str, allow_prelude: bool) -> Option<String> {
    let words: Vec<&str> = segment
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut i = 0;
    let program = loop {
        let word = *words.get(i)?;
        let base = word.rsplit('/').next().unwrap_or(word);
        if is_assignment(word) {
            i += 1;
        } else if let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == base) {
            i = wrapper.skip(&words, i + 1);
        } else {
            break word;
        }
    };
    let base = program.rsplit('/').next().unwrap_or(program);
    if PRELUDES.contains(&base) && !allow_prelude {
        return None;
    }
    if INTERPRETERS.contains(&base) {
        let rest = &words[i + 1..];
        if let Some(script) = rest
            .iter()
            .find(|w| !w.starts_with('-') && !w.contains('>'))
        {
            return Some((*script).to_owned());
        }
    }
    Some(program.to_owned())
}

/// `NAME=value` before a program.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Maps other characters to `-`, collapses runs of `-`, trims to start with a letter or digit.
fn sanitize(word: &str) -> String {
    let mut out = String::new();
    for ch in word.chars() {
        let ch = if ch.is_ascii_alphanumeric() || ch == '.' || ch == '_' {
            ch
        } else {
            '-'
        };
        if !(ch == '-' && out.ends_with('-')) {
            out.push(ch);
        }
    }
    let trimmed = out
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .trim_end_matches('-');
    let name: String = trimmed.chars().take(MAX_LEN).collect();
    if name.is_empty() {
        "job".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_working_program() {
        assert_eq!(
            derive("/usr/local/bin/backup.sh --full >/dev/null 2>&1"),
            "backup.sh"
        );
        assert_eq!(derive("cd /srv/app && ./bin/sync-all"), "sync-all");
        assert_eq!(
            derive("test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )"),
            "cron.daily"
        );
        assert_eq!(derive("nice php /var/www/artisan schedule:run"), "artisan");
        assert_eq!(derive("LANG=C /opt/x/report"), "report");
        assert_eq!(derive("$HOME/bin/clean"), "clean");
        assert_eq!(derive("ärger"), "rger");
        assert_eq!(derive("%%%"), "job");
        assert_eq!(derive("/bin/true"), "true");
        assert_eq!(derive("sleep 30"), "sleep");
        assert_eq!(derive(&"a".repeat(300)).len(), 100);
    }

    #[test]
    fn wrappers_and_their_options_are_skipped() {
        let cases = [
            ("sudo -u app backup.sh", "backup.sh"),
            ("sudo -u app -- /opt/bin/backup.sh --full", "backup.sh"),
            ("/usr/bin/sudo -H -u app /srv/sync-all", "sync-all"),
            ("sudo --user=app rotate-logs", "rotate-logs"),
            ("su app -c '/usr/local/bin/backup.sh --full'", "backup.sh"),
            ("su -c \"/usr/local/bin/report\" app", "report"),
            ("su - app -c 'nice -n 10 /srv/reindex'", "reindex"),
            ("env VAR=x LANG=C cleanup", "cleanup"),
            ("env -u HOME -i PATH=/bin purge-cache", "purge-cache"),
            ("nice -n 19 ionice -c 3 /usr/bin/rsync -a /a /b", "rsync"),
            ("nice -19 compress-old", "compress-old"),
            ("ionice -c2 -n7 dump-db", "dump-db"),
            (
                "flock -n /run/lock/backup.lock /usr/local/bin/backup.sh",
                "backup.sh",
            ),
            ("flock -w 10 /tmp/x.lock -c 'mirror-sync'", "mirror-sync"),
            ("timeout 1h /usr/bin/certbot renew", "certbot"),
            ("timeout -s KILL -k 5 60 fetch-feeds", "fetch-feeds"),
            ("timeout --signal=TERM 60 fetch-feeds", "fetch-feeds"),
            ("sudo -u app timeout 60 nice /srv/app/bin/worker", "worker"),
            ("sudo -u app sh -c 'run-me'", "run-me"),
        ];
        for (script, name) in cases {
            assert_eq!(derive(script), name, "{script}");
        }
        // A wrapper with nothing after it is named after itself, not after its options.
        assert_eq!(derive("sudo -u app"), "job");
    }

    #[test]
    fn duplicates_get_suffixes() {
        let mut names = Names::default();
        assert_eq!(names.unique_for("backup"), "backup");
        assert_eq!(names.unique_for("backup"), "backup-2");
        assert_eq!(names.unique_for("/bin/backup x"), "backup-3");
        let long = "b".repeat(120);
        assert_eq!(names.unique_for(&long).len(), 100);
        let second = names.unique_for(&long);
        assert_eq!(second.len(), 100);
        assert!(second.ends_with("-2"));
    }
}

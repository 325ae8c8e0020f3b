//! Job names derived from crontab commands: the program that does the work (or the script an
//! interpreter runs), reduced to the config's name charset and made unique.

use std::collections::HashSet;

/// The longest job name the config accepts.
const MAX_LEN: usize = 100;

/// Words that only start another program; the name comes from the program after them.
const WRAPPERS: [&str; 12] = [
    "sudo", "nice", "ionice", "nohup", "timeout", "flock", "exec", "env", "command", "time",
    "chronic", "setsid",
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
/// `allow_prelude`.
fn segment_program(segment: &str, allow_prelude: bool) -> Option<String> {
    let mut words = segment
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .skip_while(|w| is_assignment(w) || WRAPPERS.contains(w) || w.starts_with('-'));
    let program = words.next()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    if PRELUDES.contains(&base) && !allow_prelude {
        return None;
    }
    if INTERPRETERS.contains(&base) {
        if let Some(script) = words.find(|w| !w.starts_with('-') && !w.contains('>')) {
            return Some(script.to_owned());
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

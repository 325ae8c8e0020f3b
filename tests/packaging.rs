//! The files under `packaging/` against the code: the sidecar example's embedded config passes
//! `config check`, the Kubernetes manifests (parsed as YAML) run non-root with a read-only root,
//! the default seccomp profile, no capabilities and resources, the CronJob keeps its outbox on a
//! claim that outlives the pod, the container build copies everything the binary embeds, the
//! systemd unit's stop timeout covers the daemon's shutdown, the Debian package keeps the
//! config from other users, and the binary is PIE with full RELRO and BIND_NOW.

use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::util::outbox::{Behaviour, PingHost};
use crate::util::{self, Home};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative)).expect("packaging file")
}

/// The block scalar `config.toml: |` of a ConfigMap in `yaml`, de-indented.
fn embedded_config(yaml: &str) -> String {
    let mut lines = yaml.lines().skip_while(|l| l.trim() != "config.toml: |");
    lines.next().expect("a config.toml block");
    let body: Vec<&str> = lines
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .expect("a non-empty block");
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sidecar_config_passes_config_check() {
    let config = embedded_config(&read("packaging/kubernetes/sidecar.yaml"));
    assert!(config.contains("[[jobs]]"), "{config}");
    let home = Home::new();
    let path = home.path("config.toml");
    std::fs::write(&path, &config).expect("write");
    let out = home
        .agent()
        .args(["config", "check", "--config"])
        .arg(&path)
        .output()
        .expect("run");
    if out.status.success() {
        return;
    }
    // Until the status endpoint is merged, `[status]` is the one unknown key it may have.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&*path.to_string_lossy()))
        .collect();
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(!problems.is_empty(), "{stderr}");
    for problem in problems {
        assert!(
            problem.contains("key `status`: unknown key"),
            "only [status] may be unknown: {problem}\n{config}"
        );
    }
}

#[test]
fn container_build_copies_every_file_the_binary_embeds() {
    let containerfile = read("packaging/container/Containerfile");
    let copied: Vec<PathBuf> = containerfile
        .lines()
        .filter_map(|l| l.strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let sources = &words[..words.len().saturating_sub(1)];
            sources.iter().map(|s| repo().join(s)).collect::<Vec<_>>()
        })
        .collect();
    assert!(copied.contains(&repo().join("src")), "{copied:?}");
    let mut embedded = Vec::new();
    collect_includes(&repo().join("src"), &mut embedded);
    assert!(
        embedded.iter().any(|p| p.ends_with("config/demo.toml")),
        "{embedded:?}"
    );
    for file in embedded {
        let file = file.canonicalize().expect("the embedded file exists");
        assert!(
            copied.iter().any(|c| file.starts_with(c)),
            "{} is embedded by the binary but not copied by the Containerfile",
            file.display()
        );
    }
    let ignore = read("packaging/container/Containerfile.dockerignore");
    for dir in ["src/", "config/", "Cargo.toml", "Cargo.lock"] {
        assert!(ignore.contains(&format!("!{dir}")), "{ignore}");
    }
}

/// Every file named by `include_str!`/`include_bytes!` in the Rust sources under `dir`.
fn collect_includes(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_includes(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("source");
            for part in text.split("include_").skip(1) {
                let Some(rest) = part
                    .strip_prefix("str!(\"")
                    .or_else(|| part.strip_prefix("bytes!(\""))
                else {
                    continue;
                };
                let name = rest.split('"').next().expect("a string literal");
                found.push(path.parent().expect("parent").join(name));
            }
        }
    }
}

/// The value of `key=` in the packaged systemd unit (its first occurrence).
fn unit_value(key: &str) -> String {
    read("packaging/systemd/heartbeat-agent.service")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
}

#[test]
fn unit_stop_timeout_covers_the_daemon_shutdown() {
    let value = unit_value;
    let secs = |text: String| -> u64 {
        text.strip_suffix('s')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a number of seconds: {text}"))
    };
    // The daemon's default shutdown_timeout (30 s) plus its 5 s of slack must fit.
    assert!(secs(value("TimeoutStopSec")) > 30 + 5);
    assert_eq!(value("Type"), "notify");
    assert_eq!(value("KillMode"), "mixed");
    assert_eq!(value("RestartPreventExitStatus"), "78");
    assert!(value("ExecStart").starts_with("/usr/bin/heartbeat-agent daemon --config "));
}

/// Every document of the manifest `relative` (a path under the repository).
fn manifest(relative: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(relative))
        .unwrap_or_else(|e| panic!("{relative} is not valid YAML: {e}"))
}

/// The document of `kind` in `docs`.
fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in {docs:?}"))
}

/// The pod spec of a Deployment or a CronJob.
fn pod_spec(doc: &Yaml) -> &Yaml {
    match doc["kind"].as_str() {
        Some("CronJob") => &doc["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &doc["spec"]["template"]["spec"],
    }
}

/// The container `name` of `pod`.
fn container<'a>(pod: &'a Yaml, name: &str) -> &'a Yaml {
    pod["containers"]
        .as_vec()
        .expect("a containers list")
        .iter()
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The agent's container is hardened as the Pod Security Standards' "restricted" profile asks,
/// and has requests and a memory limit.
fn assert_hardened(pod: &Yaml, c: &Yaml, what: &str) {
    let sc = &c["securityContext"];
    assert_eq!(
        sc["runAsNonRoot"].as_bool(),
        Some(true),
        "{what}: runAsNonRoot"
    );
    assert!(
        sc["runAsUser"].as_i64().is_some_and(|u| u > 0),
        "{what}: runAsUser"
    );
    assert_eq!(
        sc["readOnlyRootFilesystem"].as_bool(),
        Some(true),
        "{what}: read-only root"
    );
    assert_eq!(
        sc["allowPrivilegeEscalation"].as_bool(),
        Some(false),
        "{what}: escalation"
    );
    let dropped = sc["capabilities"]["drop"]
        .as_vec()
        .expect("capabilities.drop");
    assert_eq!(dropped, &[Yaml::String("ALL".into())], "{what}: drop ALL");
    assert!(
        sc["capabilities"]["add"].is_badvalue(),
        "{what}: adds no capability"
    );
    for (level, ctx) in [("container", sc), ("pod", &pod["securityContext"])] {
        let profile = ctx["seccompProfile"]["type"].as_str();
        assert_eq!(
            profile,
            Some("RuntimeDefault"),
            "{what}: {level} seccompProfile"
        );
    }
    let resources = &c["resources"];
    for key in ["cpu", "memory"] {
        assert!(
            resources["requests"][key].as_str().is_some(),
            "{what}: requests.{key}"
        );
    }
    assert!(
        resources["limits"]["memory"].as_str().is_some(),
        "{what}: limits.memory"
    );
    // Writable places are volumes: the state directory at least.
    let mounts = c["volumeMounts"].as_vec().expect("volumeMounts");
    let state = mounts
        .iter()
        .find(|m| m["mountPath"].as_str() == Some("/var/lib/heartbeat-agent"))
        .unwrap_or_else(|| panic!("{what}: no volume for the state directory"));
    assert_ne!(
        state["readOnly"].as_bool(),
        Some(true),
        "{what}: state is writable"
    );
    let group = pod["securityContext"]["fsGroup"].as_i64();
    assert_eq!(
        group,
        sc["runAsGroup"].as_i64(),
        "{what}: fsGroup lets the agent write it"
    );
}

/// The volume of `pod` mounted at `path` by `c`.
fn volume_at<'a>(pod: &'a Yaml, c: &Yaml, path: &str) -> &'a Yaml {
    let mount = c["volumeMounts"]
        .as_vec()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(path))
        .unwrap_or_else(|| panic!("nothing mounted at {path}"));
    pod["volumes"]
        .as_vec()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("no volume {:?}", mount["name"]))
}

#[test]
fn kubernetes_manifests_are_hardened_and_have_resources() {
    let sidecar = manifest("packaging/kubernetes/sidecar.yaml");
    let pod = pod_spec(of_kind(&sidecar, "Deployment"));
    let agent = container(pod, "heartbeat-agent");
    assert_hardened(pod, agent, "sidecar");
    let args: Vec<&str> = agent["args"]
        .as_vec()
        .expect("args")
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(
        args.contains(&"--state-dir=/var/lib/heartbeat-agent"),
        "{args:?}"
    );
    // The config is the ConfigMap mounted as a directory (not a subPath), so an update reaches
    // the file and the daemon reloads it.
    let config_volume = volume_at(pod, agent, "/etc/heartbeat-agent");
    assert!(config_volume["configMap"]["name"].as_str().is_some());
    let cron = manifest("packaging/kubernetes/cronjob.yaml");
    let pod = pod_spec(of_kind(&cron, "CronJob"));
    assert_hardened(pod, container(pod, "backup"), "cronjob");
}

/// The CronJob's undelivered ping survives its pod: the state directory is a claim (not an
/// emptyDir), and a run with the manifest's own command line against a host that is down
/// leaves the ping there, for the next pod's run to deliver.
#[test]
fn cronjob_keeps_an_undelivered_ping_for_the_next_pod() {
    let docs = manifest("packaging/kubernetes/cronjob.yaml");
    let cronjob = of_kind(&docs, "CronJob");
    assert_eq!(
        cronjob["spec"]["concurrencyPolicy"].as_str(),
        Some("Forbid")
    );
    let pod = pod_spec(cronjob);
    let backup = container(pod, "backup");
    let claim = volume_at(pod, backup, "/var/lib/heartbeat-agent")["persistentVolumeClaim"]
        ["claimName"]
        .as_str()
        .expect("the state directory is a persistentVolumeClaim");
    assert_eq!(
        of_kind(&docs, "PersistentVolumeClaim")["metadata"]["name"].as_str(),
        Some(claim)
    );

    let home = Home::new();
    let state = home.path("claim");
    let mut argv = cronjob_argv(&docs);
    // The backup script is the last word: a command that succeeds stands in for it.
    *argv.last_mut().expect("a script") = "true".to_owned();
    for arg in &mut argv {
        if arg.starts_with("--state-dir=") {
            *arg = format!("--state-dir={}", state.display());
        }
        // Five minutes of retries in the manifest; one second here.
        if arg.starts_with("--ping-timeout=") {
            *arg = "--ping-timeout=1s".to_owned();
        }
    }
    let host = PingHost::start(Behaviour::Status(503));
    let url = host.url("nightly-token");
    let first_pod = home
        .agent()
        .args(&argv[1..])
        .env("HEARTBEAT_AGENT_PING_URL", &url)
        .output()
        .expect("run");
    assert_eq!(
        first_pod.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first_pod.stderr)
    );
    assert!(host.count("nightly-token") >= 1, "attempted");
    let kept = std::fs::read_dir(state.join("outbox"))
        .expect("an outbox in the claim")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".ping"))
        .count();
    assert_eq!(kept, 1, "the ping is kept in the claim");

    // The next pod (a new process, the same claim) delivers it before its own ping.
    host.clear();
    host.set(Behaviour::Status(200));
    let flush = home
        .agent()
        .args(["outbox", "flush"])
        .arg(format!("--state-dir={}", state.display()))
        .output()
        .expect("flush");
    assert_eq!(
        flush.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&flush.stderr)
    );
    assert_eq!(host.count("nightly-token"), 1, "delivered once");
}

/// The CronJob container's command line, from the parsed manifest.
fn cronjob_argv(docs: &[Yaml]) -> Vec<String> {
    let pod = pod_spec(of_kind(docs, "CronJob"));
    let backup = container(pod, "backup");
    backup["command"]
        .as_vec()
        .expect("a command list")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect()
}

#[test]
fn cronjob_command_runs_and_pings() {
    let docs = manifest("packaging/kubernetes/cronjob.yaml");
    let mut argv = cronjob_argv(&docs);
    assert_eq!(argv.first().map(String::as_str), Some("heartbeat-agent"));
    let env = &container(pod_spec(of_kind(&docs, "CronJob")), "backup")["env"];
    let names: Vec<&str> = env
        .as_vec()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["HEARTBEAT_AGENT_PING_URL"]);
    let home = Home::new();
    for arg in &mut argv {
        if arg.starts_with("--state-dir=") {
            *arg = format!("--state-dir={}", home.state_dir().display());
        }
    }
    // The backup script is the last word: a command that succeeds stands in for it.
    *argv.last_mut().expect("a script") = "true".to_owned();
    let emulator = util::emulator::Background::start();
    let check = emulator
        .add_heartbeat_check(&serde_json::json!({"name": "nightly-backup"}))
        .expect("check");
    let url = check["heartbeat"]["pingUrl"].as_str().expect("ping URL");
    let status = home
        .agent()
        .args(&argv[1..])
        .env("HEARTBEAT_AGENT_PING_URL", url)
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(0), "{argv:?}");
    assert_eq!(emulator.pings().len(), 1, "{argv:?}");
}

/// The binary the tests run is linked as distributions link programs that parse network input:
/// PIE, full RELRO and BIND_NOW (`scripts/check-hardening.sh`, which scripts/build-deb.sh also
/// runs on the packaged release binary).
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn the_binary_is_pie_with_full_relro_and_bind_now() {
    let out = check_hardening(&util::bin());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for property in ["PIE", "RELRO", "BIND_NOW"] {
        assert!(
            stdout.contains(&format!(": {property}: yes")),
            "{property} not reported: {stdout}"
        );
    }
}

/// The check fails on a program linked without PIE, RELRO and BIND_NOW (a C program built with
/// `cc -no-pie -Wl,-z,norelro -Wl,-z,lazy`), naming each property it lacks and what to do.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn the_hardening_check_names_what_a_binary_lacks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("main.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").expect("write main.c");
    let bin = dir.path().join("plain");
    let cc = std::process::Command::new("cc")
        .args(["-no-pie", "-Wl,-z,norelro", "-Wl,-z,lazy", "-o"])
        .arg(&bin)
        .arg(&source)
        .output()
        .expect("cc (the C compiler rustc links with)");
    assert!(cc.status.success(), "{cc:?}");
    let out = check_hardening(&bin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    for property in ["PIE", "RELRO", "BIND_NOW"] {
        assert!(
            stderr.contains(&format!(": {property}: NO (")),
            "{property} not named: {stderr}"
        );
    }
    assert!(
        stderr.contains("lacks PIE RELRO BIND_NOW: link it as rustc does by default"),
        "{stderr}"
    );
}

/// A binary with packed relative relocations (build.rs, where glibc reads them) needs glibc
/// 2.36 (`GLIBC_ABI_DT_RELR`, a version without symbols that cargo-deb's `$auto` does not
/// see): the package says so, or it would install where the binary cannot start.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn a_binary_with_packed_relocations_makes_the_package_need_glibc_2_36() {
    let out = std::process::Command::new("readelf")
        .args(["--dynamic", "--wide"])
        .arg(util::bin())
        .output()
        .expect("readelf (binutils)");
    assert!(out.status.success(), "{out:?}");
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let depends = read("Cargo.toml")
        .lines()
        .find(|l| l.starts_with("depends = "))
        .expect("the package's depends")
        .to_owned();
    if dynamic.contains("(RELR)") {
        assert!(depends.contains("libc6 (>= 2.36)"), "{depends}");
    } else {
        eprintln!("this build has no packed relocations (glibc before 2.36 or another linker)");
    }
}

/// `scripts/check-hardening.sh` run on `binary`.
fn check_hardening(binary: &Path) -> std::process::Output {
    std::process::Command::new("bash")
        .arg(repo().join("scripts/check-hardening.sh"))
        .arg(binary)
        .output()
        .expect("run scripts/check-hardening.sh")
}

/// The link order list (scripts/link-order.sh) is one mangled symbol per line and includes
/// `run`'s own code: lld would silently ignore a list that is not.
#[test]
fn the_link_order_file_is_well_formed() {
    let text = read("packaging/link/run.order");
    let names = link_order_names(text.lines());
    assert!(
        names
            .iter()
            .any(|n| n.contains("heartbeat_agent") && n.contains("run")),
        "no function of `run` in the list"
    );
}

/// The daemon's list has its steady path, then one marker line `# start-up` (build.rs splits
/// there), then its start-up; each part holds the daemon's own code.
#[test]
fn the_daemon_link_order_file_has_a_steady_part_then_a_start_up_part() {
    let text = read("packaging/link/daemon.order");
    let lines: Vec<&str> = text.lines().collect();
    let markers: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i] == "# start-up")
        .collect();
    assert_eq!(markers.len(), 1, "one `# start-up` line expected");
    let (steady, start) = lines.split_at(markers[0]);
    for (part, names) in [("steady", steady), ("start-up", start)] {
        let names = link_order_names(names.iter().copied());
        assert!(
            names.iter().any(|n| n.contains("heartbeat_agent")),
            "no function of the agent in the {part} part"
        );
    }
}

/// A stale link-order list never fails CI: `scripts/check-link-order.sh` on the binary the tests
/// run, with a list of 200 of its own function names of which a tenth are renamed, and with one
/// whose every name is gone, reports how many are left, warns about the second, and exits 0.
#[test]
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn a_stale_link_order_list_is_reported_and_never_fails() {
    let nm = std::process::Command::new("nm")
        .args(["--defined-only"])
        .arg(util::bin())
        .output()
        .expect("nm (binutils)");
    assert!(nm.status.success(), "{nm:?}");
    let symbols = String::from_utf8_lossy(&nm.stdout);
    let mut names: Vec<&str> = symbols
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| n.starts_with("_ZN") && n.contains("heartbeat_agent"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 200, "only {} symbols", names.len());
    let dir = tempfile::tempdir().expect("temp dir");
    let tenth = dir.path().join("tenth.order");
    let list: Vec<String> = names[..200]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i % 10 == 0 {
                format!("{n}_renamed")
            } else {
                (*n).to_owned()
            }
        })
        .collect();
    std::fs::write(&tenth, list.join("\n") + "\n").expect("write the list");
    let gone = dir.path().join("gone.order");
    let list: Vec<String> = names[..200].iter().map(|n| format!("{n}_gone")).collect();
    std::fs::write(&gone, list.join("\n") + "\n").expect("write the list");
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/check-link-order.sh"))
        .arg(util::bin())
        .env(
            "LINK_ORDER_LISTS",
            format!("{} {}", tenth.display(), gone.display()),
        )
        .output()
        .expect("run scripts/check-link-order.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("180 of 200 names of"), "{stdout}");
    assert!(stdout.contains("0 of 200 names of"), "{stdout}");
    assert!(
        stderr.contains("gone.order is stale") && !stderr.contains("tenth.order is stale"),
        "{stderr}"
    );
}

/// The names of a link-order list (one symbol per line, `#` comments), at least 100: Rust's
/// mangled names, and the C functions the real CPU runs (`main`, ring's, crt's `_start`).
fn link_order_names<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let names: Vec<&str> = lines
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(names.len() > 100, "only {} entries", names.len());
    let symbol_char = |c: char| c.is_ascii_alphanumeric() || "_.$".contains(c);
    for name in &names {
        assert!(name.chars().all(symbol_char), "not a symbol name: {name:?}");
    }
    assert!(
        names
            .iter()
            .filter(|n| n.starts_with("_ZN") || n.starts_with("_R"))
            .count()
            * 2
            > names.len(),
        "most names are Rust's mangled symbols"
    );
    names
}

/// The Debian changelog (lintian's `no-changelog` otherwise) opens with the package's version
/// as cargo-deb builds it (`VERSION-1`), and every lintian override in the package has its
/// reason in a comment right above it.
#[test]
fn the_debian_changelog_has_the_package_version_and_each_lintian_override_a_reason() {
    let cargo = read("Cargo.toml");
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the package's version in Cargo.toml");
    let changelog = read("packaging/debian/changelog");
    let first = changelog.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("heartbeat-agent ({version}-1) ")),
        "packaging/debian/changelog starts with {first:?}, not version {version}-1: add an \
         entry for the new version"
    );
    let overrides = read("packaging/debian/lintian-overrides");
    let lines: Vec<&str> = overrides.lines().collect();
    let tags: Vec<usize> = (0..lines.len())
        .filter(|&i| !lines[i].starts_with('#') && !lines[i].trim().is_empty())
        .collect();
    assert!(!tags.is_empty(), "no override in the file");
    for i in tags {
        assert!(
            lines[i].starts_with("heartbeat-agent: "),
            "not an override of this package: {:?}",
            lines[i]
        );
        assert!(
            i > 0 && lines[i - 1].starts_with("# "),
            "override without its reason in a comment above it: {:?}",
            lines[i]
        );
    }
}

/// The config can hold secrets: the package installs it 0640 (`Cargo.toml`), and postinst
/// gives it to group `heartbeat-agent` through a statoverride (kept by dpkg on upgrades), after
/// creating that group; postrm drops the override on purge. Both scripts parse (`sh -n`) and
/// keep the `#DEBHELPER#` place where cargo-deb adds the systemd steps.
#[test]
fn the_debian_config_is_readable_by_root_and_the_agent_group_only() {
    let cargo = read("Cargo.toml");
    let asset = cargo
        .lines()
        .find(|l| l.contains("\"etc/heartbeat-agent/config.toml\""))
        .expect("the config among the package's assets");
    assert!(asset.trim_end().ends_with("\"640\"],"), "{asset}");
    for script in ["packaging/debian/postinst", "packaging/debian/postrm"] {
        let parsed = std::process::Command::new("sh")
            .arg("-n")
            .arg(repo().join(script))
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&parsed.stderr);
        assert!(parsed.status.success(), "{script}: {stderr}");
        assert!(read(script).contains("\n#DEBHELPER#\n"), "{script}");
    }
    let postinst = read("packaging/debian/postinst");
    assert!(postinst.contains("\nCONFIG=/etc/heartbeat-agent/config.toml\n"));
    let configure = postinst
        .split("if [ \"$1\" = \"configure\" ]; then")
        .nth(1)
        .expect("a configure branch");
    let user = configure
        .find("adduser --system --group")
        .expect("the group is created");
    let mode = configure
        .find("dpkg-statoverride --update --add root heartbeat-agent 0640 \"$CONFIG\"")
        .expect("the config's owner, group and mode");
    assert!(
        user < mode,
        "the group must exist before the override names it"
    );
    let postrm = read("packaging/debian/postrm");
    let purge = postrm
        .split("if [ \"$1\" = \"purge\" ]; then")
        .nth(1)
        .expect("a purge branch");
    assert!(
        purge.contains("dpkg-statoverride --remove \"$CONFIG\""),
        "{postrm}"
    );
}

/// docs/daemon.md shows no unit of its own but the packaged one, and its steps for a build from
/// source put each file where that unit looks (user, binary, config with its mode and group,
/// the credential's key file), then check the config as the unit's user, naming the file. The
/// check step is then run as written would run it: as a user of the unit's group on a copy of
/// the config made as step 4 makes it (owner root, group the unit's, mode 640), and it passes;
/// another user gets `Permission denied` with what to do.
#[test]
fn the_daemon_doc_installs_the_packaged_unit_and_its_steps_work() {
    use std::os::unix::fs::PermissionsExt;
    let value = unit_value;
    let exec = value("ExecStart");
    let mut words = exec.split(' ');
    let binary = words.next().expect("a program");
    let config = exec
        .split("--config ")
        .nth(1)
        .expect("--config in ExecStart");
    let (user, group) = (value("User"), value("Group"));
    let key = value("LoadCredential");
    let key = key
        .strip_prefix("api-key:")
        .expect("the api-key credential");

    let doc = read("docs/daemon.md");
    let section = doc
        .split("### systemd\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("a systemd section");
    assert!(
        !section.contains("[Service]"),
        "a unit other than the packaged one"
    );
    assert!(section.contains("packaging/systemd/heartbeat-agent.service"));
    let steps = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the steps");
    let line = |needle: &str| {
        steps
            .lines()
            .find(|l| !l.starts_with('#') && l.contains(needle))
            .unwrap_or_else(|| panic!("no step with {needle:?}:\n{steps}"))
    };
    assert!(line("adduser --system").ends_with(&format!(" {user}")));
    assert!(line("target/release/heartbeat-agent").ends_with(&format!(" {binary}")));
    assert!(line("packaging/systemd/heartbeat-agent.service")
        .ends_with(" /etc/systemd/system/heartbeat-agent.service"));
    let install_config = line("config/example.toml");
    assert!(
        install_config.contains(&format!("-m 0640 -o root -g {group} "))
            && install_config.ends_with(&format!(" {config}")),
        "{install_config}"
    );
    assert!(
        line("/dev/null").contains("-m 0600") && line("/dev/null").ends_with(&format!(" {key}"))
    );
    assert_eq!(
        line("config check"),
        format!("sudo -u {user} heartbeat-agent config check {config}")
    );
    assert!(!steps.contains("api_key_file ="), "{steps}");

    // Step 6 as written, on a copy made as step 4 makes it (the unit's group stands as
    // nobody's group here): the unit's user reads it through its group; another user cannot.
    let root = nix::unistd::geteuid().is_root();
    if !util::require(
        root,
        "root",
        "run as root (chown to another group; CI does)",
    ) {
        return;
    }
    let home = Home::new();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let copy = dir.path().join("config.toml");
    std::fs::copy(repo().join("config/example.toml"), &copy).expect("copy");
    let nogroup = nix::unistd::Gid::from_raw(65534);
    nix::unistd::chown(&copy, Some(nix::unistd::Uid::from_raw(0)), Some(nogroup)).expect("chown");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let shown = copy.to_str().expect("utf-8");
    let as_user = |gid: &str| {
        home.agent_via(&[
            "setpriv",
            "--reuid=65534",
            &format!("--regid={gid}"),
            "--clear-groups",
        ])
        .args(["config", "check", shown])
        .output()
        .expect("the agent runs")
    };
    let member = as_user("65534");
    assert_eq!(
        member.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&member.stderr)
    );
    assert!(String::from_utf8_lossy(&member.stdout).contains("valid, 10 jobs"));
    let other = as_user("65533");
    assert_eq!(other.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&other.stderr)
            .contains("Permission denied (os error 13); run as a member of group heartbeat-agent or with sudo"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
}

//! Configuration trees, diffs and the command score on real FRR 8.4.4 and nftables output.
//!
//! `data/*.conf` are `show running-config` of FRR 8.4.4 (Debian) in a network namespace
//! after the `*.cmds` next to them were typed into vtysh: `frr84-initial` after `base.cmds`,
//! `frr84-truth` after `base.cmds` + `task.cmds`, `frr84-renamed` after `base.cmds` +
//! `renamed.cmds` (the same intent with other names, sequence numbers and order),
//! `frr84-acl-reordered` after `base.cmds` + `reordered.cmds` (access-list 10's two entries
//! swapped), `frr84-changed` after `base.cmds` + `task.cmds` + `changes.cmds`.
//! `linux-state.txt` is `nft list ruleset` and `tc qdisc show` after `nft.cmds`.

use netdojo_config::config::{Config, Dialect};
use netdojo_config::diff::diff;
use netdojo_config::score::{DeviceEdits, score};

const INITIAL: &str = include_str!("data/frr84-initial.conf");
const TRUTH: &str = include_str!("data/frr84-truth.conf");
const RENAMED: &str = include_str!("data/frr84-renamed.conf");
const REORDERED: &str = include_str!("data/frr84-acl-reordered.conf");
const CHANGED: &str = include_str!("data/frr84-changed.conf");
const BASE_CMDS: &str = include_str!("data/base.cmds");
const TASK_CMDS: &str = include_str!("data/task.cmds");
const CHANGES_CMDS: &str = include_str!("data/changes.cmds");
const NFT_CMDS: &str = include_str!("data/nft.cmds");
const LINUX_STATE: &str = include_str!("data/linux-state.txt");

fn frr(text: &str) -> Config {
    Config::parse(text, Dialect::Frr).expect("parses")
}

fn commands(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn applied(initial: &Config, cmds: &str) -> Config {
    let mut c = initial.clone();
    c.apply(&commands(cmds), Dialect::Frr).expect("applies");
    c
}

fn paths(config_before: &Config, config_after: &Config) -> Vec<String> {
    diff(config_before, config_after).iter().map(ToString::to_string).collect()
}

/// The oracle's case: the running configuration after the ground truth, against the ground
/// truth typed on the initial configuration.
fn device(final_text: &str) -> DeviceEdits {
    let initial = frr(INITIAL);
    DeviceEdits::new("R1", &initial, &frr(final_text), &applied(&initial, TASK_CMDS))
}

#[test]
fn a_real_running_config_parses_into_its_hierarchy() {
    insta::assert_snapshot!(frr(TRUTH).render());
}

#[test]
fn typed_commands_give_the_tree_frr_prints() {
    // The startup commands alone miss only what FRR prints of its own.
    let typed = Config::from_commands(&commands(BASE_CMDS), Dialect::Frr).expect("applies");
    assert_eq!(paths(&typed, &frr(INITIAL)), ["hostname R1", "no ipv6 forwarding"]);
    // The ground truth typed on the initial configuration is the configuration FRR ends with.
    assert_eq!(paths(&applied(&frr(INITIAL), TASK_CMDS), &frr(TRUTH)), Vec::<String>::new());
    // Replacements, removals, negated defaults, sequence numbers, vrf: as FRR did them.
    assert_eq!(paths(&applied(&frr(TRUTH), CHANGES_CMDS), &frr(CHANGED)), Vec::<String>::new());
}

#[test]
fn the_ground_truth_edits() {
    let initial = frr(INITIAL);
    insta::assert_snapshot!(paths(&initial, &applied(&initial, TASK_CMDS)).join("\n"));
}

#[test]
fn the_edits_of_a_change_with_removals_and_reordering() {
    insta::assert_snapshot!(paths(&frr(TRUTH), &frr(CHANGED)).join("\n"));
}

#[test]
fn the_oracle_scores_one() {
    let s = score(&[device(TRUTH)]);
    assert_eq!((s.precision, s.recall, s.f1), (1.0, 1.0, 1.0), "{s:#?}");
    assert_eq!(s.agent_edits, 28);
}

#[test]
fn renamed_lists_maps_and_chains_still_score_one() {
    let s = score(&[device(RENAMED)]);
    assert_eq!((s.precision, s.recall, s.f1), (1.0, 1.0, 1.0), "{s:#?}");
    let renamed: Vec<_> = s.matched.iter().filter(|m| m.agent != m.truth).collect();
    insta::assert_json_snapshot!(renamed);
}

#[test]
fn a_missing_command_lowers_recall() {
    let without = TRUTH.replace("ip route 2.2.2.0/24 10.0.0.2\n", "");
    let s = score(&[device(&without)]);
    assert_eq!(s.precision, 1.0);
    assert!((s.recall - 27.0 / 28.0).abs() < 1e-12, "{s:#?}");
    assert_eq!(s.missing, ["R1: ip route 2.2.2.0/24 10.0.0.2"]);
}

#[test]
fn an_extra_command_lowers_precision() {
    let with = TRUTH.replace("!\nend", "!\nip route 9.9.9.0/24 blackhole\n!\nend");
    let s = score(&[device(&with)]);
    assert_eq!(s.recall, 1.0);
    assert!((s.precision - 28.0 / 29.0).abs() < 1e-12, "{s:#?}");
    assert_eq!(s.extra, ["R1: ip route 9.9.9.0/24 blackhole"]);
}

#[test]
fn reordered_access_list_entries_do_not_match() {
    let s = score(&[device(REORDERED)]);
    assert!(s.f1 < 1.0);
    insta::assert_json_snapshot!((&s.missing, &s.extra), @r#"
    [
      [
        "R1: access-list 10 permit 10.0.0.0/8 [first]",
        "R1: access-list 10 deny any [after: access-list 10 permit 10.0.0.0/8]"
      ],
      [
        "R1: access-list 10 seq 5 deny any [first]",
        "R1: access-list 10 seq 10 permit 10.0.0.0/8 [after: access-list 10 seq 5 deny any]"
      ]
    ]
    "#);
}

#[test]
fn reordered_ospf_networks_still_match() {
    let initial = frr(INITIAL);
    let truth =
        applied(&initial, "router ospf\nnetwork 10.0.1.0/24 area 0\nnetwork 10.0.9.0/24 area 0\nexit\n");
    let agent =
        applied(&initial, "router ospf\nnetwork 10.0.9.0/24 area 0\nnetwork 10.0.1.0/24 area 0\nexit\n");
    let s = score(&[DeviceEdits::new("R1", &initial, &agent, &truth)]);
    assert_eq!(s.f1, 1.0, "{s:#?}");
    assert_eq!(s.agent_edits, 2);
}

#[test]
fn an_nft_listing_and_the_commands_that_made_it_agree() {
    let listed = Config::parse(LINUX_STATE, Dialect::Linux).expect("parses");
    let typed = Config::from_commands(&commands(NFT_CMDS), Dialect::Linux).expect("applies");
    assert_eq!(paths(&typed, &listed), Vec::<String>::new());
    insta::assert_snapshot!(listed.render());

    let s = score(&[DeviceEdits::new("R2", &Config::default(), &listed, &typed)]);
    assert_eq!((s.f1, s.agent_edits), (1.0, 21), "{s:#?}");

    // A rule appended instead of inserted first is a different rule set.
    let appended = NFT_CMDS.replace(
        "nft insert rule inet filter input jump mychain",
        "nft add rule inet filter input jump mychain",
    );
    let agent = Config::from_commands(&commands(&appended), Dialect::Linux).expect("applies");
    let s = score(&[DeviceEdits::new("R2", &Config::default(), &agent, &typed)]);
    assert!(s.f1 < 1.0, "{s:#?}");
    assert!(s.missing.iter().any(|m| m.contains("jump mychain [first]")), "{s:#?}");
}

#[test]
fn frr_and_linux_parts_of_one_device_score_together() {
    let initial = frr(INITIAL);
    let mut final_config = frr(TRUTH);
    final_config.merge(Config::parse(LINUX_STATE, Dialect::Linux).expect("parses"));
    let mut expected = applied(&initial, TASK_CMDS);
    expected.apply(&commands(NFT_CMDS), Dialect::Linux).expect("applies");
    let s = score(&[DeviceEdits::new("R1", &initial, &final_config, &expected)]);
    assert_eq!((s.f1, s.agent_edits), (1.0, 49), "{s:#?}");
}

/// A generated 20,000-line running configuration: the diff finds exactly the changes.
#[test]
fn a_large_configuration_diffs_correctly() {
    let mut text = String::from("frr version 8.4.4\nfrr defaults traditional\nhostname BIG\n!\n");
    for i in 0..2_000 {
        text.push_str(&format!(
            "interface eth{i}\n ip address 10.{}.{}.1/30\n ip ospf cost {}\nexit\n!\n",
            i / 256,
            i % 256,
            i % 50 + 1
        ));
    }
    for i in 0..10_000 {
        text.push_str(&format!("ip route 172.{}.{}.0/24 10.0.0.2\n", 16 + i / 256, i % 256));
    }
    text.push_str("router ospf\n");
    for i in 0..2_000 {
        text.push_str(&format!(" network 10.{}.{}.0/30 area 0\n", i / 256, i % 256));
    }
    text.push_str("exit\n!\n");
    for i in 0..2_000 {
        text.push_str(&format!(
            "ip prefix-list BIG seq {} permit 192.{}.{}.0/24\n",
            (i + 1) * 5,
            168 + i / 256,
            i % 256
        ));
    }
    text.push_str("end\n");
    let before = frr(&text);
    assert!(before.len() >= 20_000, "{}", before.len());

    let changed = text
        .replace(" ip ospf cost 7\n", " ip ospf cost 70\n")
        .replace("ip route 172.17.0.0/24 10.0.0.2\n", "")
        .replace(
            "ip prefix-list BIG seq 5000 permit",
            "ip prefix-list BIG seq 4998 permit 1.0.0.0/8\nip prefix-list BIG seq 5000 permit",
        )
        .replace("router ospf\n", "router ospf\n network 192.0.2.0/24 area 1\n");
    let start = std::time::Instant::now();
    let after = frr(&changed);
    let edits = diff(&before, &after);
    eprintln!("parse + diff of {} lines: {:?}", after.len(), start.elapsed());

    let mut got: Vec<String> = edits.iter().map(|e| e.path()).collect();
    got.sort();
    let mut want: Vec<String> =
        vec!["no ip route 172.17.0.0/24 10.0.0.2".into(), "router ospf > network 192.0.2.0/24 area 1".into()];
    want.push("ip prefix-list BIG seq 4998 permit 1.0.0.0/8".into());
    for i in (0..2_000).filter(|i| i % 50 + 1 == 7) {
        want.push(format!("interface eth{i} > ip ospf cost 70"));
        want.push(format!("interface eth{i} > no ip ospf cost 7"));
    }
    want.sort();
    assert_eq!(got, want);
    let inserted = edits.iter().find(|e| e.line.contains("seq 4998")).and_then(|e| e.order.clone());
    assert_eq!(
        inserted.and_then(|o| o.after).as_deref(),
        Some("ip prefix-list BIG seq 4995 permit 192.171.230.0/24")
    );
}

/// 100,000-line inputs of every shape that once took quadratic time read and diff to what they
/// should (their speed is `cargo xtask bench config`'s business, not a test's).
#[test]
fn large_inputs_of_every_shape_read_and_diff_correctly() {
    use netdojo_config::config::ConfigError;
    use netdojo_config::shapes::{Expected, shapes};
    for shape in shapes(100_000) {
        let parse = |text: &str| Config::parse(text, shape.dialect);
        match shape.expected {
            Expected::Unclosed => {
                assert_eq!(
                    parse(&shape.before),
                    Err(ConfigError::UnclosedBlock { open: 3 }),
                    "{}",
                    shape.name
                );
            }
            Expected::Edits(n) => {
                let before = parse(&shape.before).unwrap_or_else(|e| panic!("{}: {e}", shape.name));
                let after = parse(&shape.after).unwrap_or_else(|e| panic!("{}: {e}", shape.name));
                // Only `!` separators carry nothing.
                assert!(before.len() >= shape.lines * 2 / 3, "{}: {} lines", shape.name, before.len());
                let edits = diff(&before, &after);
                assert_eq!(edits.len(), n, "{}: {edits:#?}", shape.name);
            }
        }
    }
}

/// testdata/config-edits/: hand-labelled before/after pairs (see its README.md). The diff of
/// each has exactly the edits an engineer counts, and where the pair lists them, those edits.
#[test]
fn the_hand_labelled_corpus_counts_as_an_engineer_does() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/config-edits");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("testdata/config-edits")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 40, "{} pairs", files.len());
    let mut wrong = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("reads");
        let pair: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let dialect = match pair["dialect"].as_str() {
            Some("frr") => Dialect::Frr,
            Some("ios") => Dialect::Ios,
            Some("linux") => Dialect::Linux,
            other => panic!("{name}: dialect {other:?}"),
        };
        let lines = |key: &str| -> String {
            let lines: Vec<&str> =
                pair[key].as_array().expect("lines").iter().map(|l| l.as_str().expect("a line")).collect();
            lines.join("\n") + "\n"
        };
        let before = Config::parse(&lines("before"), dialect).unwrap_or_else(|e| panic!("{name}: {e}"));
        let after = Config::parse(&lines("after"), dialect).unwrap_or_else(|e| panic!("{name}: {e}"));
        let edits: Vec<String> = diff(&before, &after).iter().map(ToString::to_string).collect();
        let count = pair["edits"].as_u64().expect("edits") as usize;
        if edits.len() != count {
            wrong.push(format!("{name}: {} edits, labelled {count}: {edits:#?}", edits.len()));
        }
        if let Some(expected) = pair.get("expected").and_then(|e| e.as_array()) {
            let expected: Vec<&str> = expected.iter().map(|e| e.as_str().expect("an edit")).collect();
            if edits != expected {
                wrong.push(format!("{name}: edits {edits:#?}, labelled {expected:#?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

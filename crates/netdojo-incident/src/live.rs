//! A lab brought up: netdojo-linux's [`Network`] (namespaces, links, FRR with the routers'
//! startup configurations), the lab's `linux` lines run, its services started, and every health
//! check passing. Readiness is polled from the checks themselves (no fixed sleep): the lab is
//! up the moment its last check passes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use netdojo_linux::network::{BuildTimes, Network};
use netdojo_linux::pool::{PoolHandle, RouterSpec};
use netdojo_linux::topology::{IPV4_ONLY, NodeKind, Topology};
use netdojo_linux::{exec, frr};
use tokio::sync::Mutex;

use crate::error::IncidentError;
use crate::fault::Action;
use crate::health::{self, AddressBook, Health, Patience};
use crate::lab::Lab;
use crate::services::Services;

/// The longest [`LiveLab::wait_health`] goes without a round of every check while the routers'
/// state fails: about a failing round's length (its probes wait [`Patience::POLL`]).
pub const ROUND_EVERY: Duration = Duration::from_millis(200);

/// How often a wait reads the routers' state: every 10 ms for its first half second, when
/// protocols that converge at all mostly have, then every 50 ms, so that a long wait (a step
/// that changed nothing waits out the settle time) does not spend a core on reads.
fn state_every(since: Instant) -> Duration {
    if since.elapsed() < Duration::from_millis(500) {
        Duration::from_millis(10)
    } else {
        Duration::from_millis(50)
    }
}

/// How long [`LiveLab::start`] waits for every check to pass.
pub const CONVERGENCE: Duration = Duration::from_secs(20);

/// What each phase of [`LiveLab::start`] took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StartTimes {
    /// Namespaces, links, addresses, FRR started and configured (netdojo-linux's phases).
    pub network: BuildTimes,
    /// The lab's `linux` lines.
    pub linux: Duration,
    /// The routers' startup configurations applied (vtysh, all routers at once).
    pub config: Duration,
    /// Starting the services' processes.
    pub services: Duration,
    /// [`LiveLab::start_injected`]: the faults' `linux` actions and service operations (their
    /// vtysh lines are part of [`config`](Self::config)).
    pub inject: Duration,
    /// From then until every check passed, or (started injected) until exactly the symptom's
    /// checks failed (the last round, [`health`](Self::health), included).
    pub converge: Duration,
    /// The last round of checks, the one that passed (or showed the symptom).
    pub health: Duration,
    pub total: Duration,
}

/// A running lab.
#[derive(Debug)]
pub struct LiveLab {
    lab: Lab,
    book: AddressBook,
    services: Mutex<Services>,
    times: StartTimes,
    /// The routers whose OSPF external routes wait for [`LiveLab::release_ospf_externals`].
    ospf_held: Vec<String>,
    /// What [`LiveLab::kick_hellos`] sends.
    hello_kicks: Vec<HelloKick>,
    /// The routers running every daemon of [`daemons`] ([`LiveLab::touch`]).
    complete: Mutex<BTreeSet<String>>,
    // Last: dropped after the services, which run in its namespaces.
    network: Network,
}

/// Every OSPF neighbour of a lab's routers at one moment ([`LiveLab::ospf_hearing`]): what
/// [`heard_since`] compares.
#[derive(Debug, Clone)]
pub struct OspfHearing {
    /// When the first read was sent and the last answered.
    begun: Instant,
    ended: Instant,
    /// (router, neighbour's router id, interface) → (state, milliseconds until its dead timer
    /// fires).
    neighbours: BTreeMap<(String, String, String), (String, i64)>,
}

/// How much later a dead timer must fire than it would have without a hello in between before
/// it counts as restarted: FRR's timers are read in milliseconds.
const HEARD_MARGIN_MS: i64 = 10;

/// Whether no OSPF adjacency can die before `until` for want of hellos since `before`, and none
/// is forming: every neighbour of `before` is in `now`, those whose dead timer could fire
/// before `until` heard from in between (the timer restarted: it fires later than `before`
/// said it would), and every neighbour of `now` is settled (`Full`, or `2-Way` with a
/// DROther, where two DROthers stay) or stuck (in the state `before` saw it in: an MTU
/// mismatch holds an adjacency in `ExStart` for good; one forming moves on within
/// milliseconds). With `before` read after a change and `until` the change
/// plus [`QUIET`](crate::env::QUIET), that is what waiting out `QUIET` shows: an adjacency the
/// change broke by its hellos that dies within it (on the labs' 1 s dead interval; one on a
/// 3 s interval dies after `QUIET` either way). Conservative about time: a read of `before`
/// is taken as early as it can have been for when its timers fire, and the reads of `now` as
/// early as they can have been against the latest of `before`.
pub fn heard_since(before: &OspfHearing, now: &OspfHearing, until: Instant) -> bool {
    let between = now.begun.saturating_duration_since(before.ended).as_millis() as i64;
    let window = until.saturating_duration_since(before.begun).as_millis() as i64;
    let settled = |state: &str| state.starts_with("Full") || state == "2-Way/DROther";
    before.neighbours.iter().all(|(key, (_, due_before))| {
        now.neighbours.get(key).is_some_and(|(_, due_now)| {
            *due_before > window + HEARD_MARGIN_MS || *due_now > due_before - between + HEARD_MARGIN_MS
        })
    }) && now.neighbours.iter().all(|(key, (state, _))| {
        settled(state) || before.neighbours.get(key).is_some_and(|(was, _)| was == state)
    })
}

/// The FRR daemons every router of every lab can run (besides zebra, which always runs), so
/// that an operator (or an agent) can configure any protocol and any static route anywhere, as
/// on a real router. A router starts with those its configuration uses ([`topology_of`]:
/// staticd only where it has a static route); the others start, and take their share of its
/// configuration, the first time anything addresses the router ([`LiveLab::touch`]): an
/// agent's tool call, a fault's injection. An unused daemon holds no state another can see
/// (bgpd without `router bgp` opens no port, ospfd without `router ospf` sends no hello,
/// staticd without a route installs none), so until then nothing tells the two apart; a
/// daemon's start is most of a router's setup (docs/incident.md, "Speed"). ospf6d
/// ([`DAEMONS_IPV6`]) runs only where the lab turns IPv6 on: with IPv6 off in the kernel it
/// has nothing to route.
pub const DAEMONS: [&str; 3] = ["staticd", "ospfd", "bgpd"];
/// What a router of a lab with IPv6 runs besides [`DAEMONS`].
pub const DAEMONS_IPV6: [&str; 1] = ["ospf6d"];

/// The daemons (besides zebra) a router of a lab with (`ipv6`) or without IPv6 can run.
pub fn daemons(ipv6: bool) -> Vec<String> {
    let extra: &[&str] = if ipv6 { &DAEMONS_IPV6 } else { &[] };
    DAEMONS.iter().chain(extra).map(|d| d.to_string()).collect()
}

/// The sysctls every node of a lab gets (a node's own setting wins). ICMP errors are not
/// rate-limited, so that traces and repeated health rounds see every hop; IPv6 is off unless
/// the lab uses it, and then addresses skip duplicate address detection and routers forward
/// IPv6.
fn base_sysctls(ipv6: bool, router: bool) -> BTreeMap<String, String> {
    let mut s = BTreeMap::new();
    let mut add = |k: &str, v: &str| {
        s.insert(k.to_string(), v.to_string());
    };
    add("net.ipv4.icmp_ratelimit", "0");
    if ipv6 {
        add("net.ipv6.icmp.ratelimit", "0");
        add("net.ipv6.conf.all.accept_dad", "0");
        add("net.ipv6.conf.default.accept_dad", "0");
        if router {
            add("net.ipv6.conf.all.forwarding", "1");
        }
    } else {
        for (k, v) in IPV4_ONLY {
            add(k, v);
        }
    }
    s
}

/// What a warm pool's routers must be to serve the routers of labs with (`ipv6`) or without
/// IPv6: zebra at least, staticd too only where a node lists it (the pool serves a node from a
/// router running its other daemons, kept through the router's reset, or starts them as it is
/// taken: see [`DAEMONS`]) and the base sysctls. A router with sysctls of its own (an
/// `rp_filter`) is served too; they are written as it is taken.
pub fn router_spec(ipv6: bool) -> RouterSpec {
    RouterSpec { daemons: Vec::new(), sysctls: base_sysctls(ipv6, true), staticd_on_demand: true }
}

/// The topology netdojo-linux builds for `lab`: the lab's, every router running the daemons its
/// configuration uses (`netdojo_linux::frr::daemons_of`, and any other its node lists), every
/// node with the base sysctls under its own.
pub fn topology_of(lab: &Lab) -> Topology {
    let mut topology = lab.topology();
    for (_, node) in topology.topology.nodes.0.iter_mut() {
        let router = node.kind == NodeKind::Frr;
        for (k, v) in base_sysctls(lab.ipv6, router) {
            node.sysctls.entry(k).or_insert(v);
        }
        if router {
            let used = frr::daemons_of(node.config.as_deref().unwrap_or_default());
            for d in used {
                if !node.daemons.iter().any(|n| n == d) {
                    node.daemons.push(d.to_string());
                }
            }
        }
    }
    topology
}

impl LiveLab {
    /// Builds the lab and waits (up to [`CONVERGENCE`]) until every check passes.
    pub async fn start(lab: &Lab) -> Result<LiveLab, IncidentError> {
        Self::start_within(lab, CONVERGENCE).await
    }

    /// [`start`](Self::start) with its own bound on convergence. On failure the error names the
    /// checks still failing, and everything started is stopped.
    pub async fn start_within(lab: &Lab, convergence: Duration) -> Result<LiveLab, IncidentError> {
        Self::start_with(lab, None, convergence).await
    }

    /// [`start_within`](Self::start_within), with the routers that match `pool`'s
    /// [`router_spec`] taken from it (daemons already running): setup is then links,
    /// configuration and convergence. They go back to the pool at [`stop`](Self::stop).
    pub async fn start_with(
        lab: &Lab,
        pool: Option<&PoolHandle>,
        convergence: Duration,
    ) -> Result<LiveLab, IncidentError> {
        let start = Instant::now();
        let mut live = Self::build(lab, pool, &[]).await?;
        let t = Instant::now();
        let (health, last) = live
            .kicking_hellos(async {
                live.release_ospf_externals(&BTreeSet::new(), convergence).await?;
                Ok::<_, IncidentError>(live.wait_failing(&BTreeSet::new(), convergence).await)
            })
            .await?;
        live.times.health = last;
        if !health.all_passed() {
            return Err(IncidentError::NotHealthy {
                lab: lab.name.clone(),
                waited: t.elapsed(),
                failing: health.describe_failing(),
                state: live.routers_state().await,
            });
        }
        live.times.converge = t.elapsed();
        live.times.total = start.elapsed();
        Ok(live)
    }

    /// The lab with `inject` in from the start (an incident that was there "since this
    /// morning"): its `linux` actions run after the lab's own `linux` lines, its vtysh lines
    /// end each router's startup configuration (applied with it, so no router ever runs without
    /// the fault: a fault applied a moment later would let an adjacency form first, and then
    /// wait out its dead interval), its service operations follow the services' start. Served
    /// once exactly the checks of `symptom` fail and every other passes (up to `within`).
    /// Returns that health. Whether a task's faults show the same symptom this way as
    /// when injected into a converged lab is for the generator to verify
    /// ([`crate::task::Setup::inject_at_start`]); some types are never tried
    /// ([`crate::FaultType::injects_at_start`]).
    pub async fn start_injected(
        lab: &Lab,
        pool: Option<&PoolHandle>,
        inject: &[Action],
        symptom: &BTreeSet<String>,
        within: Duration,
    ) -> Result<(LiveLab, Health), IncidentError> {
        let start = Instant::now();
        let mut live = Self::build(lab, pool, inject).await?;
        let t = Instant::now();
        let (health, last) = live
            .kicking_hellos(async {
                live.release_ospf_externals(symptom, within).await?;
                Ok::<_, IncidentError>(live.wait_failing(symptom, within).await)
            })
            .await?;
        live.times.health = last;
        let failing = health.failing_set();
        if &failing != symptom {
            let show = |s: &BTreeSet<String>| s.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
            return Err(IncidentError::NotShowing {
                lab: lab.name.clone(),
                waited: t.elapsed(),
                expected: show(symptom),
                failing: show(&failing),
                state: live.routers_state().await,
            });
        }
        live.times.converge = t.elapsed();
        live.times.total = start.elapsed();
        Ok((live, health))
    }

    /// The network built, the `linux` lines run, the routers configured and the services
    /// started, with `inject` woven in as [`start_injected`](Self::start_injected) says:
    /// everything but the wait for the protocols.
    async fn build(
        lab: &Lab,
        pool: Option<&PoolHandle>,
        inject: &[Action],
    ) -> Result<LiveLab, IncidentError> {
        let mut topology = topology_of(lab);
        // A router a fault is injected on runs every daemon from the start (touched by the
        // injection): the fault's lines go in with its startup configuration.
        let all = daemons(lab.ipv6);
        let faulted: BTreeSet<String> = inject
            .iter()
            .filter_map(|a| match a {
                Action::Vtysh { device, .. } => Some(device.clone()),
                _ => None,
            })
            .collect();
        let mut complete = BTreeSet::new();
        for (name, node) in topology.topology.nodes.0.iter_mut() {
            if node.kind == NodeKind::Frr
                && (faulted.contains(name) || all.iter().all(|d| node.daemons.contains(d)))
            {
                for d in &all {
                    if !node.daemons.contains(d) {
                        node.daemons.push(d.clone());
                    }
                }
                complete.insert(name.clone());
            }
        }
        // Routers get their configuration after the lab's `linux` lines: a router with some (a
        // firewall's ruleset) loads them before its routing configuration, as a router loads its
        // firewall before its routing daemons start (a BGP session opened before a stateful
        // ruleset would be cut by it). Every router's is deferred, so that the build's FRR phase
        // is the daemons alone and configuration is a phase of its own.
        let mut deferred: Vec<(String, String)> = Vec::new();
        for (name, node) in topology.topology.nodes.0.iter_mut() {
            if node.kind == NodeKind::Frr
                && let Some(config) = node.config.take()
            {
                deferred.push((name.clone(), config));
            }
        }
        for action in inject {
            let Action::Vtysh { device, lines } = action else { continue };
            let Some((_, config)) = deferred.iter_mut().find(|(name, _)| name == device) else {
                return Err(IncidentError::NotRouter { lab: lab.name.clone(), node: device.clone() });
            };
            for line in lines.iter().filter(|l| !is_framing(l)) {
                if !config.ends_with('\n') {
                    config.push('\n');
                }
                config.push_str(line);
            }
        }
        // OSPF external routes wait for `release_ospf_externals` (see `hold_ospf_externals`).
        let mut ospf_held = Vec::new();
        for (name, config) in deferred.iter_mut() {
            if let Some(held) = hold_ospf_externals(config) {
                *config = held;
                ospf_held.push(name.clone());
            }
        }
        let (network, built) = Network::build_with(topology, pool)
            .await
            .map_err(|source| IncidentError::Network { lab: lab.name.clone(), source })?;
        let services =
            Services::new(&lab.services, |n| network.ns_name(n).map(str::to_string), lab.ipv6).map_err(
                |message| IncidentError::Service { lab: lab.name.clone(), service: "*".into(), message },
            )?;
        let mut live = LiveLab {
            lab: lab.clone(),
            book: AddressBook::of(lab),
            services: Mutex::new(services),
            times: StartTimes { network: built, ..StartTimes::default() },
            ospf_held,
            hello_kicks: Vec::new(),
            complete: Mutex::new(complete),
            network,
        };
        let t = Instant::now();
        live.run_linux().await?;
        live.times.linux = t.elapsed();
        let t = Instant::now();
        for action in inject.iter().filter(|a| matches!(a, Action::Linux { .. })) {
            live.apply(action).await?;
        }
        live.times.inject = t.elapsed();
        // The routers a fault goes into first, then the others: a faulted router's own lines
        // come before the fault's (an area 0 network statement, then the fault's move to area
        // 1), and in between it sends hellos. A neighbour configured at the same time could
        // answer them and form an adjacency the fault then breaks, which the neighbour holds
        // until its dead interval ends (1 s, in about half the starts of an area mismatch on
        // enterprise: the yardstick task's setup was 0.5 s or 1.3 s by that race). A neighbour
        // without its own configuration yet runs no OSPF on that link and hears nothing.
        let (first, rest): (Vec<_>, Vec<_>) =
            deferred.into_iter().partition(|(name, _)| faulted.contains(name));
        let t = Instant::now();
        live.configure(&first).await?;
        live.configure(&rest).await?;
        live.times.config = t.elapsed();
        live.hello_kicks = first.iter().chain(&rest).filter_map(|(r, c)| hello_kick(r, c)).collect();
        let t = Instant::now();
        live.services.lock().await.start_all().await.map_err(|message| IncidentError::Service {
            lab: lab.name.clone(),
            service: "*".into(),
            message,
        })?;
        live.times.services = t.elapsed();
        let t = Instant::now();
        for action in inject.iter().filter(|a| matches!(a, Action::Service { .. })) {
            live.apply(action).await?;
        }
        live.times.inject += t.elapsed();
        Ok(live)
    }

    /// Applies routers' startup configurations (those deferred until after the `linux` lines),
    /// a BGP router's with [`BGP_RELEASE`] after it. Each is trusted text (the lab file's), so
    /// it goes straight to the router's daemons on their vty sockets ([`Frr::apply_config`],
    /// as `vtysh -f` would apply it) rather than through a vtysh process.
    ///
    /// [`Frr::apply_config`]: netdojo_linux::frr::Frr::apply_config
    async fn configure(&self, configs: &[(String, String)]) -> Result<(), IncidentError> {
        let applies = configs.iter().map(|(router, config)| async move {
            let frr = self.frr_of(router)?;
            let release = releases_bgp_at_once(config);
            let mut text = config.clone();
            if release {
                for line in BGP_RELEASE {
                    text.push('\n');
                    text.push_str(line);
                }
            }
            frr.apply_config(&text).await.map_err(|source| IncidentError::Frr {
                lab: self.lab.name.clone(),
                device: router.clone(),
                source,
            })?;
            if release {
                self.flush_route_maps(router).await?;
            }
            Ok::<_, IncidentError>(())
        });
        futures::future::try_join_all(applies).await?;
        Ok(())
    }

    /// Lets the OSPF routers that [`hold_ospf_externals`] held originate their external routes,
    /// once the other OSPF routers can install them on arrival ([`LiveLab::asbrs_known`]), at
    /// most `within`. Each held router's `redistribute` and `default-information originate`
    /// lines, as its running configuration has them (a fault woven into the configuration may
    /// have removed or changed one), are typed again without the holding route-map, which is
    /// then deleted: the running configuration is the lab's. An AS-external LSA that reaches a
    /// router whose last SPF found its ASBR is installed at once (ospf_ase.c
    /// `ospf_ase_incremental_update`); one flooded with the initial database waits for the
    /// external route calculation that each SPF schedules a fixed second later
    /// (`OSPF_ASE_CALC_INTERVAL`, no command sets it).
    async fn release_ospf_externals(
        &self,
        failing: &BTreeSet<String>,
        within: Duration,
    ) -> Result<(), IncidentError> {
        let held = &self.ospf_held;
        if held.is_empty() {
            return Ok(());
        }
        // Read once: the OSPF routers, and the held routers' router-ids (set by their
        // configuration, already applied).
        let speakers: Vec<String> = self
            .lab
            .topology()
            .nodes()
            .filter(|(_, n)| n.config.as_deref().is_some_and(|c| c.lines().any(opens_ospf)))
            .map(|(name, _)| name.to_string())
            .collect();
        let ids: BTreeMap<String, String> =
            futures::future::try_join_all(held.iter().map(|r| self.ospf_json(r, "show ip ospf json")))
                .await?
                .into_iter()
                .zip(held)
                .filter_map(|(v, r)| Some((r.clone(), v["routerId"].as_str()?.to_string())))
                .collect();
        let start = Instant::now();
        let mut quiet = 0;
        while start.elapsed() < within {
            match self.asbrs_known(failing, &speakers, &ids).await? {
                Known::All => break,
                Known::NotYet => quiet = 0,
                Known::Settled => {
                    quiet += 1;
                    if quiet >= 3 {
                        break;
                    }
                }
            }
            tokio::time::sleep(state_every(start)).await;
        }
        tracing::debug!(lab = %self.lab.name, elapsed = ?start.elapsed(), "releasing OSPF externals");
        let releases = held.iter().map(|router| async move {
            let frr = self.frr_of(router)?;
            let frr_err =
                |source| IncidentError::Frr { lab: self.lab.name.clone(), device: router.clone(), source };
            // `show running-config` is an enable-mode command on a daemon's vty.
            let lines = ["enable", "show running-config"].map(String::from);
            let running = frr
                .vty("ospfd", &lines, Duration::from_secs(5))
                .await
                .map_err(frr_err)?
                .pop()
                .unwrap_or_default();
            frr.apply_config(&release_ospf_externals(&running)).await.map_err(frr_err)?;
            Ok::<_, IncidentError>(())
        });
        futures::future::try_join_all(releases).await?;
        Ok(())
    }

    /// Whether every OSPF router of `speakers` has the held routers (router-ids `ids`) among the
    /// ASBRs its last SPF found (`show ip ospf route json`, `routerType` `asbr`), after every
    /// adjacency the lab checks is Full (those in `failing` excepted). A router a fault cuts off
    /// never finds them: once the adjacencies are Full and no router has an SPF pending, the
    /// routers are [`Known::Settled`].
    async fn asbrs_known(
        &self,
        failing: &BTreeSet<String>,
        speakers: &[String],
        ids: &BTreeMap<String, String>,
    ) -> Result<Known, IncidentError> {
        let adjacency = |name: &str| name.starts_with("ospf ") && !failing.contains(name);
        if let Some(state) = health::run_state(&self.network, &self.lab, &self.book).await
            && !state.results.iter().filter(|r| adjacency(&r.name)).all(|r| r.passed)
        {
            return Ok(Known::NotYet);
        }
        let routes = futures::future::try_join_all(
            speakers.iter().map(|r| self.ospf_json(r, "show ip ospf route json")),
        )
        .await?;
        let listed = speakers.iter().zip(&routes).all(|(router, table)| {
            ids.iter()
                .filter(|(asbr, _)| *asbr != router)
                .all(|(_, id)| table[id.as_str()]["routerType"].as_str() == Some("asbr"))
        });
        if listed {
            return Ok(Known::All);
        }
        let processes =
            futures::future::try_join_all(speakers.iter().map(|r| self.ospf_json(r, "show ip ospf json")))
                .await?;
        let pending = processes.iter().any(|v| v.get("spfTimerDueInMsecs").is_some());
        Ok(if pending { Known::NotYet } else { Known::Settled })
    }

    /// What each router's daemons say of their interfaces, neighbours and sessions, for a lab
    /// that did not come up: the failing checks say what is missing, this in what state the
    /// protocols were (a neighbour stuck short of Full, a session waiting for a next hop, an
    /// interface down). Read on the daemons' vty sockets; a daemon that does not answer is
    /// named as such.
    async fn routers_state(&self) -> String {
        let mut commands = vec![
            ("zebra", "show interface brief"),
            ("ospfd", "show ip ospf neighbor"),
            ("bgpd", "show bgp summary"),
        ];
        if self.lab.ipv6 {
            commands.push(("ospf6d", "show ipv6 ospf6 neighbor"));
        }
        let reads = self.lab.routers().into_iter().map(|router| {
            let commands = &commands;
            async move {
                let mut text = format!("--- {router}\n");
                let Ok(frr) = self.frr_of(router) else { return text };
                let running = frr.daemons();
                for (daemon, command) in commands.iter().filter(|(d, _)| running.contains(d)) {
                    match frr.show(daemon, command).await {
                        Ok(out) => text.push_str(&format!("# {command}\n{}\n", out.trim_end())),
                        Err(e) => text.push_str(&format!("# {command}: {daemon} did not answer: {e}\n")),
                    }
                }
                // The kernel's side beside zebra's: an interface zebra shows without its address
                // (seen once, enterprise's core) is either never addressed or missed by zebra.
                let kernel = tokio::process::Command::new("ip")
                    .args(["-n", frr.ns(), "-br", "address", "show"])
                    .output()
                    .await;
                match kernel {
                    Ok(out) => text.push_str(&format!(
                        "# ip -br address show\n{}",
                        String::from_utf8_lossy(&out.stdout)
                    )),
                    Err(e) => text.push_str(&format!("# ip -br address show: {e}\n")),
                }
                text
            }
        });
        futures::future::join_all(reads).await.concat()
    }

    /// Every OSPF neighbour of every router now, as its ospfd sees it ([`OspfHearing`]); `None`
    /// where that proves nothing: a router runs ospf6d (which gives its neighbours' dead timers
    /// in whole seconds) or a read fails or is not the JSON expected.
    pub async fn ospf_hearing(&self) -> Option<OspfHearing> {
        let mut ospf = Vec::new();
        for router in self.lab.routers() {
            let frr = self.network.frr(router)?;
            let daemons = frr.daemons();
            if daemons.contains(&"ospf6d") {
                return None;
            }
            if daemons.contains(&"ospfd") {
                ospf.push((router, frr));
            }
        }
        let begun = Instant::now();
        let reads = ospf.iter().map(|(router, frr)| async move {
            (*router, frr.show("ospfd", "show ip ospf neighbor json").await)
        });
        let answers = futures::future::join_all(reads).await;
        let mut neighbours = BTreeMap::new();
        for (router, answer) in answers {
            let v: serde_json::Value = serde_json::from_str(&answer.ok()?).ok()?;
            // ospfd without `router ospf` answers `{}`.
            let Some(by_id) = v.get("neighbors") else {
                if v.as_object().is_some_and(|o| o.is_empty()) {
                    continue;
                }
                return None;
            };
            for (id, entries) in by_id.as_object()? {
                for entry in entries.as_array()? {
                    let text = |k: &str| entry.get(k).and_then(|x| x.as_str());
                    let state = text("nbrState").or_else(|| text("state"))?.to_string();
                    let due = entry
                        .get("routerDeadIntervalTimerDueMsec")
                        .or_else(|| entry.get("deadTimeMsecs"))
                        .and_then(|x| x.as_i64())?;
                    let interface = text("ifaceName")?.to_string();
                    neighbours.insert((router.to_string(), id.clone(), interface), (state, due));
                }
            }
        }
        Some(OspfHearing { begun, ended: Instant::now(), neighbours })
    }

    /// A JSON `show` answered by `router`'s ospfd (null when it is not JSON).
    async fn ospf_json(&self, router: &str, command: &str) -> Result<serde_json::Value, IncidentError> {
        let text = self.frr_of(router)?.show("ospfd", command).await.map_err(|source| {
            IncidentError::Frr { lab: self.lab.name.clone(), device: router.into(), source }
        })?;
        Ok(serde_json::from_str(&text).unwrap_or_default())
    }

    /// Readies `device` for whatever addresses it (see [`DAEMONS`]): on a router not running
    /// every daemon yet, starts the others and gives them their share of the router's
    /// configuration, the lab's (nothing but the lab's own lines has reached a router before its
    /// first touch). A host, or a router already complete, is left as it is.
    pub async fn touch(&self, device: &str) -> Result<(), IncidentError> {
        let Some(frr) = self.network.frr(device) else { return Ok(()) };
        let mut complete = self.complete.lock().await;
        if complete.contains(device) {
            return Ok(());
        }
        let frr_err =
            |source| IncidentError::Frr { lab: self.lab.name.clone(), device: device.into(), source };
        let new = frr.start_more(&daemons(self.lab.ipv6)).await.map_err(frr_err)?;
        let config = self.lab.topology().node(device).and_then(|n| n.config.clone()).unwrap_or_default();
        if !new.is_empty() {
            frr.apply_config_to(&config, &new).await.map_err(frr_err)?;
        }
        tracing::debug!(lab = %self.lab.name, device, started = ?new, "router touched: every daemon runs");
        complete.insert(device.to_string());
        Ok(())
    }

    fn frr_of(&self, router: &str) -> Result<&netdojo_linux::frr::Frr, IncidentError> {
        self.network
            .frr(router)
            .ok_or_else(|| IncidentError::NotRouter { lab: self.lab.name.clone(), node: router.into() })
    }

    /// Has bgpd apply its route-map changes now rather than when the route-map update timer
    /// fires (a second after [`BGP_RELEASE`] armed it): until then its update groups hold their
    /// announcements. `bgp route-map delay-timer 0` runs a pending update at once
    /// (bgp_vty.c); the timer is then set back to the lab's 1 s. Sent on bgpd's own vty socket
    /// (no vtysh process).
    async fn flush_route_maps(&self, router: &str) -> Result<(), IncidentError> {
        let frr = self.frr_of(router)?;
        let lines = [
            "enable",
            "configure terminal",
            "bgp route-map delay-timer 0",
            "bgp route-map delay-timer 1",
            "end",
        ]
        .map(String::from);
        frr.vty("bgpd", &lines, Duration::from_secs(5)).await.map_err(|source| IncidentError::Frr {
            lab: self.lab.name.clone(),
            device: router.into(),
            source,
        })?;
        Ok(())
    }

    /// `work` (the wait for a starting lab), with [`kick_hellos`](Self::kick_hellos) at each
    /// of [`HELLO_KICKS`] meanwhile. A kick under way when `work` ends is finished, not dropped:
    /// dropped between its two lines it would leave an interface at the other hello interval.
    async fn kicking_hellos<T>(&self, work: impl Future<Output = T>) -> T {
        if self.hello_kicks.is_empty() {
            return work.await;
        }
        let (done, mut finished) = tokio::sync::watch::channel(false);
        let work = async {
            let out = work.await;
            done.send_replace(true);
            out
        };
        let kicks = async {
            let start = Instant::now();
            for at in HELLO_KICKS {
                tokio::select! {
                    _ = tokio::time::sleep(at.saturating_sub(start.elapsed())) => {}
                    _ = finished.wait_for(|done| *done) => return,
                }
                if let Err(error) = self.kick_hellos().await {
                    // Only a start's speed depends on the kicks: the wait reports a lab that does
                    // not come up.
                    tracing::warn!(lab = %self.lab.name, %error, "kicking OSPF hellos");
                    return;
                }
            }
        };
        tokio::join!(work, kicks).0
    }

    /// Has every OSPF interface with a whole-second hello interval ([`classic_hellos`]) send a
    /// hello now, listing the neighbours it has heard. A router's first hello goes out as its
    /// interface comes up in OSPF, so on each link one end's is lost (its neighbour runs no
    /// OSPF there yet) and the other's reaches it listing nobody: without a kick, the two-way
    /// state waits for the next hello, a second later, and a lab of 1 s hellos converged in
    /// 1.1-1.3 s where one of 100 ms hellos took 0.3-0.6 s. ospfd sends a hello when an
    /// interface's hello interval changes (ospf_vty.c: not when it is set to the value it has,
    /// so the kick sets another first, and the neighbour drops that one hello for its
    /// interval), ospf6d whenever it is set (ospf6_interface.c). The running configuration is
    /// unchanged.
    async fn kick_hellos(&self) -> Result<(), IncidentError> {
        let sends = self.hello_kicks.iter().map(|HelloKick { router, daemons }| async move {
            let frr = self.frr_of(router)?;
            for (daemon, lines) in daemons {
                frr.vty(daemon, lines, Duration::from_secs(5)).await.map_err(|source| {
                    IncidentError::Frr { lab: self.lab.name.clone(), device: router.clone(), source }
                })?;
            }
            Ok::<_, IncidentError>(())
        });
        futures::future::try_join_all(sends).await?;
        Ok(())
    }

    /// The lab's `linux` lines: nodes concurrently, each node's lines in order.
    async fn run_linux(&self) -> Result<(), IncidentError> {
        let per_node = self.lab.linux.iter().map(|(node, lines)| async move {
            for line in lines {
                self.run_linux_line(node, line).await?;
            }
            Ok::<_, IncidentError>(())
        });
        futures::future::try_join_all(per_node).await?;
        Ok(())
    }

    async fn run_linux_line(&self, device: &str, line: &str) -> Result<String, IncidentError> {
        let lab = &self.lab.name;
        let ns = self.ns(device)?;
        let command = exec::trusted(line).map_err(|e| IncidentError::Apply {
            lab: lab.clone(),
            device: device.into(),
            message: format!("`{line}`: {e}"),
        })?;
        let out = exec::run(ns, &command, &exec::Policy::default())
            .await
            .map_err(|source| IncidentError::Exec { lab: lab.clone(), device: device.into(), source })?;
        if out.status != Some(0) {
            return Err(IncidentError::Apply {
                lab: lab.clone(),
                device: device.into(),
                message: format!("`{line}` failed: {}", out.text.trim()),
            });
        }
        Ok(out.text)
    }

    fn ns(&self, node: &str) -> Result<&str, IncidentError> {
        self.network
            .ns_name(node)
            .ok_or_else(|| IncidentError::NoNode { lab: self.lab.name.clone(), node: node.into() })
    }

    /// Runs every check once, concurrently, with the patience of a verdict.
    pub async fn health(&self) -> Health {
        health::run_all(&self.network, &self.lab, &self.book, Patience::VERDICT).await
    }

    /// Polls the checks until `want` holds or `timeout` passes; returns the last health seen.
    /// Each round's probes wait [`Patience::POLL`], so a round that fails costs little; when
    /// `timeout` ends the wait, the last round's failing probes are looked at once more with the
    /// patience of a verdict ([`health::confirm`]), since what is returned then is a verdict.
    pub async fn wait_health(&self, want: impl Fn(&Health) -> bool, timeout: Duration) -> Health {
        self.wait_health_timed(want, timeout).await.0
    }

    /// [`wait_health`](Self::wait_health), with how long its last round took. Between rounds,
    /// while some router's own state fails ([`health::run_state`]: adjacencies, sessions,
    /// routes), it is read often ([`state_every`]) and the next round waits for it to pass, or for
    /// [`ROUND_EVERY`] since the last round began: a lab that heals is seen within milliseconds
    /// of its routers' state, not a failing round's probe timeout later, and a lab that stays
    /// broken is still looked at whole as often as before.
    pub async fn wait_health_timed(
        &self,
        want: impl Fn(&Health) -> bool,
        timeout: Duration,
    ) -> (Health, Duration) {
        self.wait_health_within(want, timeout, &AtomicBool::new(false), None).await
    }

    /// [`wait_health`](Self::wait_health) from a look at the lab in which the checks of
    /// `failing` failed (a step's health before it, a prepared lab's verified symptom): each
    /// round looks at the checks that failed in the round before it (the first, at `failing`)
    /// with [`Patience::STILL`] ([`health::run_all_after`]), and a wait that ends unmet confirms
    /// the checks that failed throughout with a round's patience, not a verdict's
    /// ([`health::confirm_after`]). A lab that stays broken then costs a round of 50 ms, not
    /// 150 ms; a check that newly fails is held to a round's full patience as before.
    pub async fn wait_health_after(
        &self,
        want: impl Fn(&Health) -> bool,
        timeout: Duration,
        failing: &BTreeSet<String>,
    ) -> Health {
        self.wait_health_within(want, timeout, &AtomicBool::new(false), Some(failing)).await.0
    }

    /// [`wait_health_after`](Self::wait_health_after), whose next round begins as soon as
    /// `round_now` is set (it is cleared as the round begins), not when the state's polls would
    /// let it: for a caller that learns on its own that the round it wants is due. Rounds never
    /// overlap (two would dump the same namespaces' netlink sockets at once, which the kernel
    /// refuses).
    pub async fn wait_health_nudged(
        &self,
        want: impl Fn(&Health) -> bool,
        timeout: Duration,
        round_now: &AtomicBool,
        failing: &BTreeSet<String>,
    ) -> Health {
        self.wait_health_within(want, timeout, round_now, Some(failing)).await.0
    }

    async fn wait_health_within(
        &self,
        want: impl Fn(&Health) -> bool,
        timeout: Duration,
        round_now: &AtomicBool,
        failing: Option<&BTreeSet<String>>,
    ) -> (Health, Duration) {
        let start = Instant::now();
        let mut last: Option<Instant> = None;
        // What the next round looks at with STILL's patience, and the checks that have failed
        // since before the wait in every round so far.
        let mut still: BTreeSet<String> = failing.cloned().unwrap_or_default();
        let mut throughout = still.clone();
        loop {
            if let Some(last) = last
                && last.elapsed() < ROUND_EVERY
                && start.elapsed() < timeout
                && !round_now.load(Ordering::Relaxed)
                && health::run_state(&self.network, &self.lab, &self.book)
                    .await
                    .is_some_and(|state| !state.all_passed())
            {
                tokio::time::sleep(state_every(start)).await;
                continue;
            }
            round_now.store(false, Ordering::Relaxed);
            let round = Instant::now();
            last = Some(round);
            let health =
                health::run_all_after(&self.network, &self.lab, &self.book, Patience::POLL, &still).await;
            tracing::debug!(lab = %self.lab.name, elapsed = ?start.elapsed(), failing = %health.describe_failing(), "health round");
            if want(&health) {
                return (health, round.elapsed());
            }
            if start.elapsed() >= timeout {
                let health =
                    health::confirm_after(&self.network, &self.lab, &self.book, health, &throughout).await;
                return (health, round.elapsed());
            }
            if failing.is_some() {
                still = health.failing_set();
                throughout.retain(|name| still.contains(name));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// [`wait_health_timed`](Self::wait_health_timed) until exactly the checks of `failing` fail
    /// (none: every check passes), looking at the routers' own state first
    /// ([`health::run_state`]): a round of every check runs only once the state agrees, so the
    /// wait follows the protocols every few milliseconds instead of every probe timeout. The
    /// health returned is always a whole round, confirmed as [`wait_health`](Self::wait_health)
    /// confirms one at its timeout.
    async fn wait_failing(&self, failing: &BTreeSet<String>, timeout: Duration) -> (Health, Duration) {
        let start = Instant::now();
        let agrees = |h: &Health| h.results.iter().all(|r| r.passed != failing.contains(&r.name));
        loop {
            if let Some(state) = health::run_state(&self.network, &self.lab, &self.book).await
                && !agrees(&state)
                && start.elapsed() < timeout
            {
                tracing::debug!(lab = %self.lab.name, elapsed = ?start.elapsed(), failing = %state.describe_failing(), "state round");
                tokio::time::sleep(state_every(start)).await;
                continue;
            }
            let round = Instant::now();
            let health = health::run_all(&self.network, &self.lab, &self.book, Patience::POLL).await;
            tracing::debug!(lab = %self.lab.name, elapsed = ?start.elapsed(), failing = %health.describe_failing(), "health round");
            if agrees(&health) {
                return (health, round.elapsed());
            }
            if start.elapsed() >= timeout {
                let health = health::confirm(&self.network, &self.lab, &self.book, health).await;
                return (health, round.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Applies one operator change: vtysh configuration lines (one vtysh call), a `linux`
    /// dialect line (contained in the node's namespace), or a service operation. Returns what
    /// the device printed; a refusal is [`IncidentError::Apply`]. The action is trusted (a
    /// fault's injection or repair): its lines are not held to the agent's rules
    /// (netdojo-linux's `vty` and `exec::parse`), which an agent's tools apply first.
    pub async fn apply(&self, action: &Action) -> Result<String, IncidentError> {
        let lab = &self.lab.name;
        match action {
            Action::Vtysh { device, lines } => {
                self.ns(device)?;
                self.touch(device).await?;
                let frr = self
                    .network
                    .frr(device)
                    .ok_or_else(|| IncidentError::NotRouter { lab: lab.clone(), node: device.clone() })?;
                let text: Vec<&str> = lines.iter().filter(|l| !is_framing(l)).map(String::as_str).collect();
                let out = frr.apply_file(&(text.join("\n") + "\n")).await.map_err(|source| {
                    IncidentError::Frr { lab: lab.clone(), device: device.clone(), source }
                })?;
                if !out.success() {
                    return Err(IncidentError::Apply {
                        lab: lab.clone(),
                        device: device.clone(),
                        message: format!("vtysh refused: {}", out.text().trim()),
                    });
                }
                Ok(out.text())
            }
            Action::Linux { device, line } => self.run_linux_line(device, line).await,
            Action::Service { device, service, op } => {
                let mut services = self.services.lock().await;
                match services.node_of(service) {
                    Some(node) if node == device => {}
                    Some(node) => {
                        return Err(IncidentError::Service {
                            lab: lab.clone(),
                            service: service.clone(),
                            message: format!("runs on {node}, not on {device}"),
                        });
                    }
                    None => {
                        return Err(IncidentError::Service {
                            lab: lab.clone(),
                            service: service.clone(),
                            message: "no such service in this lab".into(),
                        });
                    }
                }
                services.apply(service, op).await.map_err(|message| IncidentError::Service {
                    lab: lab.clone(),
                    service: service.clone(),
                    message,
                })
            }
        }
    }

    /// Each service as it is now: port, records, and whether it runs.
    pub async fn services(&self) -> BTreeMap<String, (crate::lab::Service, bool)> {
        let mut services = self.services.lock().await;
        let names: Vec<String> = self.lab.services.iter().map(|s| s.name.clone()).collect();
        let mut out = BTreeMap::new();
        for name in names {
            let running = services.running(&name);
            if let Some(spec) = services.spec(&name) {
                out.insert(name, (spec.clone(), running));
            }
        }
        out
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    pub fn lab(&self) -> &Lab {
        &self.lab
    }

    /// Who owns which address (a trace's hops are named by it).
    pub fn addresses(&self) -> &AddressBook {
        &self.book
    }

    /// What [`start`](Self::start) spent in each phase.
    pub fn times(&self) -> StartTimes {
        self.times
    }

    /// Stops the services and FRR and deletes every namespace, on a blocking thread (spawn it
    /// to keep it off an episode's critical path).
    pub async fn stop(self) {
        let LiveLab { services, network, .. } = self;
        services.into_inner().stop_all();
        let _ = tokio::task::spawn_blocking(move || drop(network)).await;
    }
}

/// `start` (a lab's start), once more and afresh when it fails: a lab that does not come up
/// (not healthy, or not showing exactly its verified symptom) is none of the agent's doing, and
/// rare (dual-stack lacked an OSPFv3 route for 20 s twice in a few hundred starts), so the
/// environment and the generator start it again before they give up. The first failure is
/// logged, and kept in the error ([`IncidentError::Twice`]).
pub async fn start_twice<T, Fut>(lab: &str, start: impl Fn() -> Fut) -> Result<T, IncidentError>
where
    Fut: std::future::Future<Output = Result<T, IncidentError>>,
{
    match start().await {
        Ok(started) => Ok(started),
        Err(first) => {
            tracing::warn!(lab, "the lab did not come up ({first}); starting it once more");
            log_routers_state(lab, &first);
            start().await.map_err(|second| {
                log_routers_state(lab, &second);
                IncidentError::Twice { first: Box::new(first), second: Box::new(second) }
            })
        }
    }
}

fn log_routers_state(lab: &str, error: &IncidentError) {
    if let Some(state) = error.routers_state() {
        tracing::warn!(lab, "its routers then:\n{state}");
    }
}

/// Typed after a BGP router's startup configuration, so that bgpd starts its sessions when the
/// configuration ends rather than a second later. `LiveLab::configure` frames it in
/// `XFRR_start/end_configuration`, as `vtysh -f` frames a file; bgpd holds every peer created in between and releases them
/// (`BGP_Start` at once, not the 1 s Idle start timer) when a timer armed at the end fires: 1 s,
/// or the whole seconds left on the route-map update timer if it runs (bgp_vty.c
/// `bgp_config_end`: `thread_timer_remain_second`, which truncates). A route-map created and
/// deleted last arms that timer for `bgp route-map delay-timer` seconds; at 1 s what is left
/// when the file ends truncates to 0, so the peers start as soon as the file is read. The
/// running configuration is as without these lines (the route-map is gone), and the update
/// timer only re-walks the route-maps a second later. FRR 8.4; with the delay-timer at its
/// default (5 s) this would hold the peers 4 s, so it is added only where the configuration
/// sets it to 1 ([`releases_bgp_at_once`]).
pub const BGP_RELEASE: [&str; 3] =
    ["route-map NETDOJO-BGP-RELEASE permit 1", "exit", "no route-map NETDOJO-BGP-RELEASE"];

/// Whether `config` runs bgpd with the route-map update timer at 1 s ([`BGP_RELEASE`]).
/// `configure terminal` and `end` frame a terminal session; a configuration file (what vtysh
/// -f reads, and a router's startup configuration) is in configuration mode already.
fn is_framing(line: &str) -> bool {
    matches!(line.trim(), "configure terminal" | "conf t" | "configure" | "end")
}

fn releases_bgp_at_once(config: &str) -> bool {
    let lines: Vec<&str> = config.lines().map(str::trim).collect();
    lines.iter().any(|l| l.starts_with("router bgp ")) && lines.contains(&"bgp route-map delay-timer 1")
}

/// When [`LiveLab::kick_hellos`] runs while a lab starts, from the end of its configuration:
/// first once the routers' first hellos (a millisecond after an interface comes up in OSPF)
/// have been read, then twice more for an interface that came up later (ospfd learns an
/// interface's state from zebra, and a router's first hello lists no neighbour). A kick is
/// harmless once the adjacencies have formed: its hellos list every neighbour heard.
const HELLO_KICKS: [Duration; 3] =
    [Duration::from_millis(20), Duration::from_millis(150), Duration::from_millis(400)];

/// What [`LiveLab::kick_hellos`] sends one router.
#[derive(Debug)]
struct HelloKick {
    router: String,
    /// Each OSPF daemon with interfaces of [`classic_hellos`], and its vty lines.
    daemons: Vec<(&'static str, Vec<String>)>,
}

/// `router`'s hello kick, from its startup configuration; `None` when it has no interface of
/// [`classic_hellos`].
fn hello_kick(router: &str, config: &str) -> Option<HelloKick> {
    let (v4, v6) = classic_hellos(config);
    let mut daemons = Vec::new();
    for (daemon, hellos) in [("ospfd", v4), ("ospf6d", v6)] {
        if hellos.is_empty() {
            continue;
        }
        let mut lines = vec!["enable".to_string(), "configure terminal".to_string()];
        for (interface, seconds) in hellos {
            lines.push(format!("interface {interface}"));
            if daemon == "ospfd" {
                let other = if seconds < u32::from(u16::MAX) { seconds + 1 } else { seconds - 1 };
                lines.push(format!("ip ospf hello-interval {other}"));
                lines.push(format!("ip ospf hello-interval {seconds}"));
            } else {
                lines.push(format!("ipv6 ospf6 hello-interval {seconds}"));
            }
            lines.push("exit".to_string());
        }
        lines.push("end".to_string());
        daemons.push((daemon, lines));
    }
    (!daemons.is_empty()).then(|| HelloKick { router: router.to_string(), daemons })
}

/// The interfaces of `config` (a router's startup configuration, a fault's lines woven in at
/// its end) whose hello interval is set in whole seconds, each with the last value set: for
/// ospfd (`ip ospf hello-interval N`) and for ospf6d (`ipv6 ospf6 hello-interval N`).
/// Interfaces with sub-second hellos (`ip ospf dead-interval minimal`) need no kick: their next
/// hello is at most 100 ms away.
fn classic_hellos(config: &str) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let (mut v4, mut v6) = (BTreeMap::new(), BTreeMap::new());
    let mut fast = BTreeSet::new();
    let mut interface: Option<String> = None;
    for line in config.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["interface", name, ..] => interface = Some(name.to_string()),
            ["ip", "ospf", "hello-interval", n] | ["ipv6", "ospf6", "hello-interval", n] => {
                if let (Some(name), Ok(n)) = (&interface, n.parse::<u32>()) {
                    let map = if words[0] == "ip" { &mut v4 } else { &mut v6 };
                    map.insert(name.clone(), n);
                }
            }
            ["no", "ip", "ospf", "hello-interval", ..] | ["no", "ipv6", "ospf6", "hello-interval", ..] => {
                if let Some(name) = &interface {
                    let map = if words[1] == "ip" { &mut v4 } else { &mut v6 };
                    map.remove(name);
                }
            }
            ["ip", "ospf", "dead-interval", "minimal", ..] => {
                if let Some(name) = &interface {
                    fast.insert(name.clone());
                }
            }
            ["ip", "ospf", "dead-interval", _] | ["no", "ip", "ospf", "dead-interval", ..] => {
                if let Some(name) = &interface {
                    fast.remove(name);
                }
            }
            [first, ..] if !line.starts_with(' ') && !first.starts_with("ip") => interface = None,
            _ => {}
        }
    }
    v4.retain(|name, _| !fast.contains(name));
    (v4, v6)
}

/// What [`LiveLab::asbrs_known`] found.
enum Known {
    /// Every OSPF router has every held router as an ASBR.
    All,
    /// Some adjacency is not Full yet, or some router's SPF is pending.
    NotYet,
    /// The adjacencies are Full and no SPF is pending, yet some router lacks a held ASBR.
    Settled,
}

/// The route-map [`hold_ospf_externals`] gives an OSPF router's redistribution while the lab
/// starts: it denies everything, so the router is an ASBR (its router-LSA says so from the
/// start) and originates no external route until [`LiveLab`] releases it.
pub const OSPF_HOLD: &str = "NETDOJO-OSPF-HOLD";

/// Whether `line` opens an OSPFv2 instance (`router ospf`, not `router ospf6`).
fn opens_ospf(line: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next() == Some("router") && words.next() == Some("ospf")
}

/// Whether `line` (trimmed) ends a configuration block.
fn closes_block(line: &str) -> bool {
    matches!(line, "exit" | "!" | "exit-vrf")
}

/// Whether `line` (trimmed, in `router ospf`) originates external routes and names no route-map
/// of its own.
fn originates_externals(line: &str) -> bool {
    (line.starts_with("redistribute ") || line.starts_with("default-information originate"))
        && !line.split_whitespace().any(|w| w == "route-map")
}

/// `config` with each `router ospf` line that originates external routes held by [`OSPF_HOLD`]
/// (defined first); `None` when there is none.
fn hold_ospf_externals(config: &str) -> Option<String> {
    let mut out = format!("route-map {OSPF_HOLD} deny 1\nexit\n");
    let mut held = false;
    let mut in_ospf = false;
    for line in config.lines() {
        let trimmed = line.trim();
        if opens_ospf(trimmed) {
            in_ospf = true;
        } else if closes_block(trimmed) || !line.starts_with(' ') {
            in_ospf = false;
        }
        out.push_str(line);
        if in_ospf && originates_externals(trimmed) {
            out.push_str(&format!(" route-map {OSPF_HOLD}"));
            held = true;
        }
        out.push('\n');
    }
    held.then_some(out)
}

/// What releases a router held by [`hold_ospf_externals`], from its ospfd's running
/// configuration: every held line typed again without the route-map, in its `router ospf`,
/// then the route-map deleted.
fn release_ospf_externals(running: &str) -> String {
    let suffix = format!(" route-map {OSPF_HOLD}");
    let mut out = String::new();
    let mut opener: Option<&str> = None;
    let mut entered = false;
    for line in running.lines() {
        let trimmed = line.trim();
        if opens_ospf(trimmed) {
            opener = Some(trimmed);
            entered = false;
        } else if closes_block(trimmed) || !line.starts_with(' ') {
            if entered {
                out.push_str("exit\n");
            }
            opener = None;
            entered = false;
        } else if let (Some(open), Some(kept)) = (opener, trimmed.strip_suffix(&suffix)) {
            if !entered {
                out.push_str(open);
                out.push('\n');
                entered = true;
            }
            out.push_str(&format!(" {kept}\n"));
        }
    }
    if entered {
        out.push_str("exit\n");
    }
    out.push_str(&format!("no route-map {OSPF_HOLD}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hearing(at: Instant, entries: &[(&str, &str, i64)]) -> OspfHearing {
        let neighbours = entries
            .iter()
            .map(|(id, state, due)| {
                (("r1".to_string(), id.to_string(), "eth1:10.0.0.1".to_string()), (state.to_string(), *due))
            })
            .collect();
        OspfHearing { begun: at, ended: at, neighbours }
    }

    #[test]
    fn a_neighbour_counts_as_heard_only_when_its_dead_timer_restarted_and_all_are_settled() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(100);
        let before = hearing(t0, &[("2.2.2.2", "Full/-", 900), ("3.3.3.3", "2-Way/DROther", 950)]);
        // Both restarted: each fires later than 100 ms sooner.
        let until = t0 + Duration::from_millis(1000);
        let heard = hearing(later, &[("2.2.2.2", "Full/-", 980), ("3.3.3.3", "2-Way/DROther", 990)]);
        assert!(heard_since(&before, &heard, until));
        // 2.2.2.2's timer only ran down (900 - 100): no hello since.
        let silent = hearing(later, &[("2.2.2.2", "Full/-", 800), ("3.3.3.3", "2-Way/DROther", 990)]);
        assert!(!heard_since(&before, &silent, until));
        // Unless its timer fires after `until` whatever happens: then QUIET would not see it die.
        assert!(heard_since(&before, &silent, t0 + Duration::from_millis(850)));
        // Within the margin of running down is not a restart either.
        let close = hearing(later, &[("2.2.2.2", "Full/-", 805), ("3.3.3.3", "2-Way/DROther", 990)]);
        assert!(!heard_since(&before, &close, until));
        // A neighbour gone (dead, or reset by the change) proves nothing.
        let gone = hearing(later, &[("3.3.3.3", "2-Way/DROther", 990)]);
        assert!(!heard_since(&before, &gone, until));
        // One forming (a new neighbour, or one the change reset) is not settled yet.
        let forming = hearing(
            later,
            &[("2.2.2.2", "Full/-", 980), ("3.3.3.3", "2-Way/DROther", 990), ("4.4.4.4", "ExStart/-", 990)],
        );
        assert!(!heard_since(&before, &forming, until));
        let towards_dr = hearing(later, &[("2.2.2.2", "2-Way/DR", 980), ("3.3.3.3", "2-Way/DROther", 990)]);
        assert!(!heard_since(&before, &towards_dr, until));
        // One stuck where it was (an MTU mismatch's ExStart) is the lab as it stays.
        let stuck = hearing(t0, &[("6.6.6.6", "ExStart/-", 900)]);
        assert!(heard_since(&stuck, &hearing(later, &[("6.6.6.6", "ExStart/-", 950)]), until));
        assert!(!heard_since(&stuck, &hearing(later, &[("6.6.6.6", "Exchange/-", 950)]), until));
        // A lab without OSPF neighbours has none to wait for.
        assert!(heard_since(&hearing(t0, &[]), &hearing(later, &[]), until));
        // A 3 s dead interval's neighbour (hellos every second) need not be heard within 1 s.
        let slow = hearing(t0, &[("5.5.5.5", "Full/-", 2100)]);
        assert!(heard_since(&slow, &hearing(later, &[("5.5.5.5", "Full/-", 2000)]), until));
    }

    #[test]
    fn every_router_runs_the_daemons_its_configuration_uses_and_a_node_s_own_sysctls_win() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/incident/labs/hub-spoke.yml");
        let lab = Lab::load(path).expect("hub-spoke");
        let topology = topology_of(&lab);
        let spec = router_spec(lab.ipv6);
        assert!(spec.daemons.is_empty() && spec.staticd_on_demand, "the pool's routers run zebra alone");
        for (name, node) in topology.nodes() {
            assert_eq!(node.sysctls.get("net.ipv4.icmp_ratelimit").map(String::as_str), Some("0"), "{name}");
            assert_eq!(
                node.sysctls.get("net.ipv6.conf.all.disable_ipv6").map(String::as_str),
                Some("1"),
                "{name}: an IPv4 lab turns IPv6 off"
            );
            if node.kind == NodeKind::Frr {
                // Every router has the pool's sysctls under its own (sp1's `rp_filter`), so a warm
                // pool serves it.
                assert!(spec.sysctls.keys().all(|k| node.sysctls.contains_key(k)), "{name}");
                assert_eq!(node.sysctls == spec.sysctls, name != "sp1", "{name}");
            }
        }
        // hq-core runs OSPF; the hubs OSPF and static routes; the spokes only static routes.
        let of = |n: &str| topology.node(n).expect(n).daemons.clone();
        assert_eq!(of("hq-core"), ["ospfd"]);
        assert_eq!(of("hub"), ["staticd", "ospfd"]);
        assert_eq!(of("sp1"), ["staticd"]);
        let sp1 = topology.node("sp1").expect("sp1");
        assert_eq!(sp1.sysctls.get("net.ipv4.conf.default.rp_filter").map(String::as_str), Some("2"));
        assert_eq!(daemons(false), ["staticd", "ospfd", "bgpd"], "what any router of an IPv4 lab can run");
        assert_eq!(
            daemons(true),
            ["staticd", "ospfd", "bgpd", "ospf6d"],
            "an IPv6 lab's routers can run ospf6d too"
        );
        let v6 = router_spec(true);
        assert_eq!(v6.sysctls.get("net.ipv6.conf.all.forwarding").map(String::as_str), Some("1"));
        assert!(!v6.sysctls.contains_key("net.ipv6.conf.all.disable_ipv6"));
    }

    #[test]
    fn hellos_are_kicked_on_interfaces_with_whole_second_hellos_at_the_value_the_configuration_leaves() {
        let config = "interface eth1\n ip ospf hello-interval 1\n ip ospf dead-interval 3\nexit\n\
                      interface eth2\n ip ospf dead-interval minimal hello-multiplier 10\nexit\n\
                      interface eth3\n ip ospf hello-interval 1\n ipv6 ospf6 hello-interval 1\nexit\n\
                      router ospf\n network 10.0.0.0/8 area 0\nexit\n\
                      interface eth4\n ip ospf hello-interval 1\n\
                      interface eth1\n ip ospf hello-interval 5\n\
                      interface eth3\n no ip ospf hello-interval\n";
        let (v4, v6) = classic_hellos(config);
        // eth1's fault (5 s) is what runs; eth3's was removed; eth2's hellos are sub-second.
        assert_eq!(v4, BTreeMap::from([("eth1".to_string(), 5), ("eth4".to_string(), 1)]));
        assert_eq!(v6, BTreeMap::from([("eth3".to_string(), 1)]));
        // Outside an interface block the line is not an interface's.
        let (v4, _) = classic_hellos("router ospf\n ip ospf hello-interval 1\n");
        assert!(v4.is_empty());
    }

    #[test]
    fn an_ospf_router_s_externals_are_held_then_released_as_its_running_configuration_has_them() {
        let config = "interface eth1\n ip ospf network point-to-point\nexit\nip route 10.1.0.0/24 10.9.0.2\n\
                      router ospf\n ospf router-id 1.1.1.1\n redistribute static metric 20\n \
                      default-information originate metric 10\n redistribute connected route-map LAN\n \
                      network 10.0.0.0/30 area 0\nexit\nrouter bgp 65001\n redistribute static\nexit\n\
                      router ospf6\n redistribute static\nexit\n";
        let held = hold_ospf_externals(config).expect("held");
        assert!(held.starts_with("route-map NETDOJO-OSPF-HOLD deny 1\nexit\n"));
        assert!(held.contains(" redistribute static metric 20 route-map NETDOJO-OSPF-HOLD\n"));
        assert!(held.contains(" default-information originate metric 10 route-map NETDOJO-OSPF-HOLD\n"));
        // Its own route-map, BGP's and OSPFv3's redistribution are left alone.
        assert!(held.contains(" redistribute connected route-map LAN\n"));
        assert!(held.contains("router bgp 65001\n redistribute static\n"));
        assert!(held.contains("router ospf6\n redistribute static\n"));
        assert_eq!(held.matches("NETDOJO-OSPF-HOLD").count(), 3);
        assert_eq!(hold_ospf_externals("router ospf\n network 10.0.0.0/30 area 0\nexit\n"), None);
        assert_eq!(hold_ospf_externals("router bgp 1\n redistribute static\nexit\n"), None);

        // ospfd's running configuration after a fault removed the default's origination.
        let running = "frr version 8.4.4\nhostname r1\n!\nrouter ospf\n ospf router-id 1.1.1.1\n \
                       redistribute static metric 20 route-map NETDOJO-OSPF-HOLD\n \
                       redistribute connected route-map LAN\n network 10.0.0.0/30 area 0\nexit\n!\n\
                       route-map NETDOJO-OSPF-HOLD deny 1\nexit\n!\nend\n";
        assert_eq!(
            release_ospf_externals(running),
            "router ospf\n redistribute static metric 20\nexit\nno route-map NETDOJO-OSPF-HOLD\n"
        );
        // Nothing held any more (a fault rewrote the line): the route-map goes all the same.
        assert_eq!(
            release_ospf_externals("router ospf\n redistribute static metric 5\nexit\n"),
            "no route-map NETDOJO-OSPF-HOLD\n"
        );
    }

    #[test]
    fn only_bgp_routers_with_a_one_second_route_map_timer_are_released_at_once() {
        assert!(releases_bgp_at_once(
            "bgp route-map delay-timer 1\nrouter bgp 65001\n neighbor 10.0.0.2 remote-as 2\n"
        ));
        assert!(!releases_bgp_at_once("router bgp 65001\n neighbor 10.0.0.2 remote-as 2\n"));
        assert!(!releases_bgp_at_once("bgp route-map delay-timer 5\nrouter bgp 65001\n"));
        assert!(!releases_bgp_at_once("bgp route-map delay-timer 1\nrouter ospf\n"));
        // Every BGP router of every lab is.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/incident/labs");
        for entry in std::fs::read_dir(dir).expect("labs") {
            let lab = Lab::load(entry.expect("entry").path()).expect("lab");
            for (name, node) in lab.topology().nodes() {
                if let Some(config) = &node.config
                    && config.contains("router bgp")
                {
                    assert!(releases_bgp_at_once(config), "{}: {name}", lab.name);
                }
            }
        }
    }
}

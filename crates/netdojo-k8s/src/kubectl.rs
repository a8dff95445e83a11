//! The agent's kubectl: `get`, `describe`, `apply -f -`, `patch` and `delete` of NetworkPolicies,
//! `get`/`describe` of pods and namespaces, over the cluster's policy store, answering as
//! kubectl does (its output shapes and its error messages). Everything in a command is
//! untrusted: it is parsed here, never handed to a shell or to a real kubectl.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerPort as K8sPort, Pod, PodSpec, PodStatus};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::model::Workload;
use crate::policy;

/// The largest manifest or patch accepted.
pub const MAX_INPUT: usize = 64 * 1024;

/// What a kubectl command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ok: bool,
    pub text: String,
    /// Whether the policy set changed.
    pub changed: bool,
}

impl Answer {
    fn ok(text: impl Into<String>) -> Self {
        Self { ok: true, text: text.into(), changed: false }
    }
    fn err(text: impl Into<String>) -> Self {
        Self { ok: false, text: text.into(), changed: false }
    }
}

/// The NetworkPolicies of a cluster, by (namespace, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Store {
    policies: BTreeMap<(String, String), NetworkPolicy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    NetworkPolicy,
    Pod,
    Namespace,
}

const NP_KIND: &str = "networkpolicy.networking.k8s.io";
const NP_PLURAL: &str = "networkpolicies.networking.k8s.io";

fn resource(word: &str) -> Result<Resource, String> {
    match word.to_ascii_lowercase().as_str() {
        "networkpolicy"
        | "networkpolicies"
        | "netpol"
        | "networkpolicy.networking.k8s.io"
        | "networkpolicies.networking.k8s.io" => Ok(Resource::NetworkPolicy),
        "pod" | "pods" | "po" => Ok(Resource::Pod),
        "namespace" | "namespaces" | "ns" => Ok(Resource::Namespace),
        _ => Err(format!("error: the server doesn't have a resource type \"{word}\"")),
    }
}

/// The parsed flags and positional words of a command.
#[derive(Debug, Default)]
struct Args {
    words: Vec<String>,
    namespace: Option<String>,
    all_namespaces: bool,
    output: Option<String>,
    file: Option<String>,
    patch: Option<String>,
    patch_type: Option<String>,
    show_labels: bool,
}

fn parse_args(tokens: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = tokens.iter();
    while let Some(t) = it.next() {
        let (flag, inline) = match t.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_string())),
            _ => (t.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("error: flag needs an argument: {name}"))
        };
        match flag {
            "-n" | "--namespace" => a.namespace = Some(value("'n' in -n")?),
            "-A" | "--all-namespaces" => a.all_namespaces = true,
            "-o" | "--output" => a.output = Some(value("'o' in -o")?),
            "-f" | "--filename" => a.file = Some(value("'f' in -f")?),
            "-p" | "--patch" => a.patch = Some(value("'p' in -p")?),
            "--type" => a.patch_type = Some(value("--type")?),
            "--show-labels" => a.show_labels = true,
            // Accepted and meaningless here.
            "--dry-run" | "--validate" | "--record" | "--wait" => {
                return Err(format!("error: flag {flag} is not supported in this environment"));
            }
            f if f.starts_with('-') => {
                return Err(format!("error: unknown flag: {f}\nSee 'kubectl --help' for usage."));
            }
            _ => a.words.push(t.clone()),
        }
    }
    Ok(a)
}

impl Store {
    pub fn new(policies: &[NetworkPolicy]) -> Self {
        let mut s = Self::default();
        for p in policies {
            s.policies.insert((policy::namespace(p).to_string(), policy::name(p).to_string()), p.clone());
        }
        s
    }

    /// The policies in force, in (namespace, name) order.
    pub fn policies(&self) -> Vec<NetworkPolicy> {
        self.policies.values().cloned().collect()
    }

    /// Replaces (or adds) one policy, as an apply does, without checks.
    pub fn put(&mut self, p: NetworkPolicy) {
        self.policies.insert((policy::namespace(&p).to_string(), policy::name(&p).to_string()), p);
    }

    /// The policy `name` of namespace `ns`.
    pub fn policy(&self, ns: &str, name: &str) -> Option<&NetworkPolicy> {
        self.policies.get(&(ns.to_string(), name.to_string()))
    }

    /// The policies of namespace `ns` (every namespace: `None`), in (namespace, name) order.
    pub fn list(&self, ns: Option<&str>) -> Vec<&NetworkPolicy> {
        self.policies.iter().filter(|((pns, _), _)| ns.is_none_or(|n| n == pns)).map(|(_, p)| p).collect()
    }

    /// Deletes one policy, returning it.
    pub fn remove(&mut self, ns: &str, name: &str) -> Option<NetworkPolicy> {
        self.policies.remove(&(ns.to_string(), name.to_string()))
    }

    /// Runs one kubectl command line (with or without the leading `kubectl`). `manifest` is
    /// what `-f -` reads.
    pub fn run(&mut self, line: &str, manifest: Option<&str>, workload: &Workload) -> Answer {
        let Some(tokens) = shlex::split(line) else {
            return Answer::err("error: the command line has an unterminated quote");
        };
        let mut tokens: &[String] = &tokens;
        if tokens.first().is_some_and(|t| t == "kubectl") {
            tokens = &tokens[1..];
        }
        let Some((verb, rest)) = tokens.split_first() else {
            return Answer::err("error: no command; use get, describe, apply, patch or delete");
        };
        let args = match parse_args(rest) {
            Ok(a) => a,
            Err(e) => return Answer::err(e),
        };
        let result = match verb.as_str() {
            "get" => self.get(&args, workload),
            "describe" => self.describe(&args, workload),
            "apply" | "create" | "replace" => self.apply(verb, &args, manifest),
            "delete" => self.delete(&args),
            "patch" => self.patch(&args),
            "edit" => {
                Err("error: `kubectl edit` needs an interactive editor; use `kubectl get ... -o yaml`, \
                           then `kubectl apply -f -` with the edited manifest, or `kubectl patch`"
                    .into())
            }
            "exec" | "debug" | "run" | "port-forward" | "cp" | "attach" | "proxy" => Err(format!(
                "error: `kubectl {verb}` is not available here; the connectivity report (the `connectivity` tool) \
                 tests every pair of pods"
            )),
            other => Err(format!("error: unknown command \"{other}\" for \"kubectl\"")),
        };
        match result {
            Ok(a) => a,
            Err(e) => Answer::err(e),
        }
    }

    fn namespace<'a>(&self, args: &'a Args) -> &'a str {
        args.namespace.as_deref().unwrap_or("default")
    }

    fn select(&self, args: &Args, name: Option<&str>) -> Result<Vec<&NetworkPolicy>, String> {
        let ns = self.namespace(args);
        match name {
            Some(n) => self
                .policies
                .get(&(ns.to_string(), n.to_string()))
                .map(|p| vec![p])
                .ok_or_else(|| format!("Error from server (NotFound): {NP_PLURAL} \"{n}\" not found")),
            None => Ok(self
                .policies
                .iter()
                .filter(|((pns, _), _)| args.all_namespaces || pns == ns)
                .map(|(_, p)| p)
                .collect()),
        }
    }

    fn pods<'w>(
        &self,
        args: &Args,
        name: Option<&str>,
        workload: &'w Workload,
    ) -> Result<Vec<&'w crate::model::PodInfo>, String> {
        let ns = self.namespace(args);
        let pods: Vec<_> = workload
            .pods
            .iter()
            .filter(|p| (args.all_namespaces || p.namespace == ns) && name.is_none_or(|n| p.name == n))
            .collect();
        if let (Some(n), true) = (name, pods.is_empty()) {
            return Err(format!("Error from server (NotFound): pods \"{n}\" not found"));
        }
        Ok(pods)
    }

    fn get(&self, args: &Args, workload: &Workload) -> Result<Answer, String> {
        let Some(kind) = args.words.first() else {
            return Err("error: You must specify the type of resource to get. Use \"kubectl api-resources\" for a complete list of supported resources.".into());
        };
        let res = resource(kind)?;
        let name = args.words.get(1).map(String::as_str);
        let output = args.output.as_deref().unwrap_or("");
        if !matches!(output, "" | "yaml" | "json" | "wide" | "name") {
            return Err(format!(
                "error: unable to match a printer suitable for the output format \"{output}\", allowed formats are: json,name,wide,yaml"
            ));
        }
        let ns = self.namespace(args);
        match res {
            Resource::NetworkPolicy => {
                let items = self.select(args, name)?;
                if items.is_empty() && !matches!(output, "yaml" | "json") {
                    return Ok(Answer::ok(if args.all_namespaces {
                        "No resources found".to_string()
                    } else {
                        format!("No resources found in {ns} namespace.")
                    }));
                }
                let values: Vec<Value> =
                    items.iter().map(|p| serde_json::to_value(p).unwrap_or(Value::Null)).collect();
                Ok(Answer::ok(match output {
                    "yaml" | "json" => render_structured(values, name.is_some(), output == "yaml"),
                    "name" => items.iter().map(|p| format!("{NP_KIND}/{}\n", policy::name(p))).collect(),
                    _ => {
                        let mut rows = vec![vec!["NAME".to_string(), "POD-SELECTOR".into(), "AGE".into()]];
                        if args.all_namespaces {
                            rows[0].insert(0, "NAMESPACE".into());
                        }
                        for p in items {
                            let sel = p.spec.as_ref().and_then(|s| s.pod_selector.as_ref());
                            let mut row =
                                vec![policy::name(p).to_string(), selector_text(sel, "<none>"), "5m".into()];
                            if args.all_namespaces {
                                row.insert(0, policy::namespace(p).to_string());
                            }
                            rows.push(row);
                        }
                        table(&rows)
                    }
                }))
            }
            Resource::Pod => {
                let pods = self.pods(args, name, workload)?;
                if pods.is_empty() {
                    return Ok(Answer::ok(format!("No resources found in {ns} namespace.")));
                }
                let values: Vec<Value> =
                    pods.iter().map(|p| serde_json::to_value(pod_object(p)).unwrap_or(Value::Null)).collect();
                Ok(Answer::ok(match output {
                    "yaml" | "json" => render_structured(values, name.is_some(), output == "yaml"),
                    "name" => pods.iter().map(|p| format!("pod/{}\n", p.name)).collect(),
                    _ => {
                        let wide = output == "wide";
                        let mut head = vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE"];
                        if wide {
                            head.extend(["IP", "NODE"]);
                        }
                        if args.show_labels {
                            head.push("LABELS");
                        }
                        let mut rows = vec![head.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
                        for p in pods {
                            let mut row =
                                vec![p.name.clone(), "1/1".into(), "Running".into(), "0".into(), "5m".into()];
                            if wide {
                                row.extend([p.ip.to_string(), "netdojo-control-plane".into()]);
                            }
                            if args.show_labels {
                                row.push(labels_text(&p.labels, "<none>"));
                            }
                            rows.push(row);
                        }
                        table(&rows)
                    }
                }))
            }
            Resource::Namespace => {
                let mut rows = vec![vec!["NAME".to_string(), "STATUS".into(), "AGE".into()]];
                if args.show_labels {
                    rows[0].push("LABELS".into());
                }
                for (n, labels) in &workload.namespaces {
                    let mut row = vec![n.clone(), "Active".into(), "5m".into()];
                    if args.show_labels {
                        row.push(labels_text(labels, "<none>"));
                    }
                    rows.push(row);
                }
                Ok(Answer::ok(table(&rows)))
            }
        }
    }

    fn describe(&self, args: &Args, workload: &Workload) -> Result<Answer, String> {
        let Some(kind) = args.words.first() else {
            return Err("error: You must specify the type of resource to describe.".into());
        };
        let name = args.words.get(1).map(String::as_str);
        match resource(kind)? {
            Resource::NetworkPolicy => {
                let items = self.select(args, name)?;
                Ok(Answer::ok(items.iter().map(|p| describe_policy(p)).collect::<Vec<_>>().join("\n\n")))
            }
            Resource::Pod => {
                let pods = self.pods(args, name, workload)?;
                let text: Vec<String> = pods
                    .iter()
                    .map(|p| {
                        let ports: Vec<String> = p
                            .ports
                            .iter()
                            .map(|c| format!("{}/{}{}", c.port, c.protocol, c.name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()))
                            .collect();
                        format!(
                            "Name:         {}\nNamespace:    {}\nLabels:       {}\nStatus:       Running\nIP:           {}\nContainers:\n  main:\n    Ports:      {}\n",
                            p.name,
                            p.namespace,
                            labels_text(&p.labels, "<none>").replace(',', "\n              "),
                            p.ip,
                            if ports.is_empty() { "<none>".into() } else { ports.join(", ") }
                        )
                    })
                    .collect();
                Ok(Answer::ok(text.join("\n\n")))
            }
            Resource::Namespace => Ok(Answer::ok(
                workload
                    .namespaces
                    .iter()
                    .filter(|(n, _)| name.is_none_or(|x| x == n.as_str()))
                    .map(|(n, l)| {
                        format!(
                            "Name:         {n}\nLabels:       {}\nStatus:       Active\n",
                            labels_text(l, "<none>")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
        }
    }

    fn apply(&mut self, verb: &str, args: &Args, manifest: Option<&str>) -> Result<Answer, String> {
        let file = args.file.as_deref().ok_or_else(|| {
            format!("error: must specify one of -f and -k\n\nSee 'kubectl {verb} -h' for help and examples")
        })?;
        if file != "-" {
            return Err(format!(
                "error: the path \"{file}\" does not exist (no files here: pass the manifest in the tool's `manifest` argument and use `-f -`)"
            ));
        }
        let text = manifest.filter(|m| !m.trim().is_empty()).ok_or("error: no objects passed to apply")?;
        if text.len() > MAX_INPUT {
            return Err(format!("error: the manifest is larger than {MAX_INPUT} bytes"));
        }
        let mut docs = policy::parse_yaml(text, "STDIN")?;
        if docs.is_empty() {
            return Err("error: no objects passed to apply".into());
        }
        // Validate every object before changing anything, as the server refuses each on its own
        // but a refused object must not leave the others half applied here.
        for d in &mut docs {
            let ns = d
                .metadata
                .namespace
                .clone()
                .or_else(|| args.namespace.clone())
                .unwrap_or_else(|| "default".into());
            if let Some(flag) = &args.namespace
                && *flag != ns
            {
                return Err(format!(
                    "error: the namespace from the provided object \"{ns}\" does not match the namespace \"{flag}\". You must pass '--namespace={ns}' to perform this operation."
                ));
            }
            d.metadata.namespace = Some(ns);
            policy::validate(d)?;
        }
        let mut out = String::new();
        let mut changed = false;
        for d in docs {
            let key = (policy::namespace(&d).to_string(), policy::name(&d).to_string());
            let word = match (verb, self.policies.get(&key)) {
                ("create", Some(_)) => {
                    return Err(format!(
                        "Error from server (AlreadyExists): error when creating \"STDIN\": {NP_PLURAL} \"{}\" already exists",
                        key.1
                    ));
                }
                ("replace", None) => {
                    return Err(format!(
                        "Error from server (NotFound): error when replacing \"STDIN\": {NP_PLURAL} \"{}\" not found",
                        key.1
                    ));
                }
                (_, Some(old)) if same_object(old, &d) => "unchanged",
                ("replace", Some(_)) => "replaced",
                (_, Some(_)) => "configured",
                (_, None) => "created",
            };
            if word != "unchanged" {
                changed = true;
            }
            out.push_str(&format!("{NP_KIND}/{} {word}\n", key.1));
            self.policies.insert(key, d);
        }
        Ok(Answer { ok: true, text: out, changed })
    }

    fn delete(&mut self, args: &Args) -> Result<Answer, String> {
        if args.file.is_some() {
            return Err(
                "error: delete -f is not supported here; name the policy: kubectl delete networkpolicy NAME"
                    .into(),
            );
        }
        let Some(kind) = args.words.first() else {
            return Err("error: You must provide one or more resources by argument or filename.".into());
        };
        match resource(kind)? {
            Resource::NetworkPolicy => {}
            Resource::Pod | Resource::Namespace => {
                return Err(format!(
                    "Error from server (Forbidden): {kind} is forbidden: the workload is fixed in this environment; only NetworkPolicies can be changed"
                ));
            }
        }
        let names = &args.words[1..];
        if names.is_empty() {
            return Err("error: resource(s) were provided, but no name was specified".into());
        }
        let ns = self.namespace(args).to_string();
        let mut out = String::new();
        for n in names {
            if self.policies.remove(&(ns.clone(), n.clone())).is_none() {
                return Err(format!("{out}Error from server (NotFound): {NP_PLURAL} \"{n}\" not found"));
            }
            out.push_str(&format!("{NP_KIND} \"{n}\" deleted\n"));
        }
        Ok(Answer { ok: true, text: out, changed: true })
    }

    fn patch(&mut self, args: &Args) -> Result<Answer, String> {
        let (Some(kind), Some(name)) = (args.words.first(), args.words.get(1)) else {
            return Err("error: resource(s) were provided, but no name was specified".into());
        };
        if resource(kind)? != Resource::NetworkPolicy {
            return Err(format!(
                "Error from server (Forbidden): {kind} is forbidden: the workload is fixed in this environment; only NetworkPolicies can be changed"
            ));
        }
        let patch = args.patch.as_deref().ok_or("error: must specify -p to patch")?;
        if patch.len() > MAX_INPUT {
            return Err(format!("error: the patch is larger than {MAX_INPUT} bytes"));
        }
        // kubectl accepts a patch in JSON or YAML.
        let patch: Value = serde_yaml_ng::from_str(patch)
            .map_err(|e| format!("error: unable to parse \"{patch}\": yaml: {e}"))?;
        let key = (self.namespace(args).to_string(), name.clone());
        let current = self
            .policies
            .get(&key)
            .ok_or_else(|| format!("Error from server (NotFound): {NP_PLURAL} \"{name}\" not found"))?;
        let mut doc = serde_json::to_value(current).map_err(|e| e.to_string())?;
        match args.patch_type.as_deref().unwrap_or("strategic") {
            // NetworkPolicy's lists carry no merge keys: a strategic merge replaces them, as a
            // JSON merge patch does.
            "strategic" | "merge" => merge_patch(&mut doc, &patch),
            "json" => json_patch(&mut doc, &patch)?,
            other => {
                return Err(format!("error: --type must be one of [json merge strategic], not \"{other}\""));
            }
        }
        let patched: NetworkPolicy = serde_json::from_value(doc).map_err(|e| {
            format!("Error from server (BadRequest): the patched object is not a valid NetworkPolicy: {e}")
        })?;
        if policy::name(&patched) != name || policy::namespace(&patched) != key.0 {
            return Err(
                "Error from server (BadRequest): the name and namespace of an object cannot be patched"
                    .into(),
            );
        }
        policy::validate(&patched)?;
        let unchanged = same_object(current, &patched);
        self.policies.insert(key, patched);
        let word = if unchanged { "patched (no change)" } else { "patched" };
        Ok(Answer { ok: true, text: format!("{NP_KIND}/{name} {word}\n"), changed: !unchanged })
    }
}

fn same_object(a: &NetworkPolicy, b: &NetworkPolicy) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

/// RFC 7386.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// RFC 6902: add, remove, replace (the operations an edit needs).
pub(crate) fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), String> {
    let ops = patch.as_array().ok_or("error: a json patch is a list of operations")?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path =
            op.get("path").and_then(Value::as_str).ok_or("error: a json patch operation needs a path")?;
        let (parent_path, last) =
            path.rsplit_once('/').ok_or_else(|| format!("error: invalid path {path:?}"))?;
        let last = last.replace("~1", "/").replace("~0", "~");
        let parent = doc
            .pointer_mut(parent_path)
            .ok_or_else(|| format!("The request is invalid: the server rejected our request due to an error in our request: doc is missing path: \"{path}\""))?;
        let value = op.get("value").cloned();
        let missing = || {
            format!(
                "The request is invalid: the server rejected our request due to an error in our request: doc is missing path: \"{path}\""
            )
        };
        match (kind, parent) {
            ("add", Value::Array(a)) => {
                let v = value.ok_or("error: add needs a value")?;
                if last == "-" {
                    a.push(v);
                } else {
                    let i: usize = last.parse().map_err(|_| missing())?;
                    if i > a.len() {
                        return Err(missing());
                    }
                    a.insert(i, v);
                }
            }
            ("add" | "replace", Value::Object(o)) => {
                if kind == "replace" && !o.contains_key(&last) {
                    return Err(missing());
                }
                o.insert(last, value.ok_or("error: add/replace needs a value")?);
            }
            ("replace", Value::Array(a)) => {
                let i: usize = last.parse().map_err(|_| missing())?;
                *a.get_mut(i).ok_or_else(missing)? = value.ok_or("error: replace needs a value")?;
            }
            ("remove", Value::Array(a)) => {
                let i: usize = last.parse().map_err(|_| missing())?;
                if i >= a.len() {
                    return Err(missing());
                }
                a.remove(i);
            }
            ("remove", Value::Object(o)) => {
                o.remove(&last).ok_or_else(missing)?;
            }
            (other, _) => {
                return Err(format!("error: unsupported json patch operation {other:?} at {path:?}"));
            }
        }
    }
    Ok(())
}

fn render_structured(values: Vec<Value>, single: bool, yaml: bool) -> String {
    let v = if single && values.len() == 1 {
        values.into_iter().next().unwrap_or(Value::Null)
    } else {
        serde_json::json!({"apiVersion": "v1", "items": values, "kind": "List", "metadata": {"resourceVersion": ""}})
    };
    if yaml {
        serde_yaml_ng::to_string(&v).unwrap_or_default()
    } else {
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    }
}

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(String::len).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> =
            r.iter().enumerate().map(|(c, s)| format!("{s:<w$}", w = widths[c])).collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

fn labels_text(labels: &BTreeMap<String, String>, none: &str) -> String {
    if labels.is_empty() {
        none.into()
    } else {
        labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// A selector as kubectl prints one (`app=frontend,tier in (web)`).
fn selector_text(sel: Option<&LabelSelector>, empty: &str) -> String {
    let Some(sel) = sel else { return empty.into() };
    let mut parts: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for r in sel.match_expressions.iter().flatten() {
        let values = r.values.as_deref().unwrap_or_default().join(",");
        parts.push(match r.operator.as_str() {
            "In" => format!("{} in ({values})", r.key),
            "NotIn" => format!("{} notin ({values})", r.key),
            "Exists" => r.key.clone(),
            "DoesNotExist" => format!("!{}", r.key),
            other => format!("{} {other} ({values})", r.key),
        });
    }
    if parts.is_empty() { empty.into() } else { parts.join(",") }
}

fn describe_ports(ports: Option<&[NetworkPolicyPort]>, word: &str, out: &mut String) {
    match ports {
        None | Some([]) => out.push_str(&format!("    {word} Port: <any> (traffic allowed to all ports)\n")),
        Some(list) => {
            for p in list {
                let port = match &p.port {
                    None => "<any>".to_string(),
                    Some(IntOrString::Int(n)) => match p.end_port {
                        Some(e) => format!("{n}-{e}"),
                        None => n.to_string(),
                    },
                    Some(IntOrString::String(s)) => s.clone(),
                };
                out.push_str(&format!(
                    "    {word} Port: {port}/{}\n",
                    p.protocol.as_deref().unwrap_or("TCP")
                ));
            }
        }
    }
}

fn describe_peers(peers: Option<&[NetworkPolicyPeer]>, word: &str, all: &str, out: &mut String) {
    match peers {
        None | Some([]) => out.push_str(&format!("    {word}: <any> ({all})\n")),
        Some(list) => {
            out.push_str(&format!("    {word}:\n"));
            for (i, peer) in list.iter().enumerate() {
                if i > 0 {
                    out.push_str("    ----------\n");
                }
                if let Some(b) = &peer.ip_block {
                    out.push_str(&format!(
                        "      IPBlock:\n        CIDR: {}\n        Except: {}\n",
                        b.cidr,
                        b.except.as_deref().unwrap_or_default().join(", ")
                    ));
                }
                if let Some(s) = &peer.namespace_selector {
                    out.push_str(&format!("      NamespaceSelector: {}\n", selector_text(Some(s), "<none>")));
                }
                if let Some(s) = &peer.pod_selector {
                    out.push_str(&format!("      PodSelector: {}\n", selector_text(Some(s), "<none>")));
                }
            }
        }
    }
}

/// `kubectl describe networkpolicy` output.
pub fn describe_policy(p: &NetworkPolicy) -> String {
    let spec = p.spec.clone().unwrap_or_default();
    let mut out = format!(
        "Name:         {}\nNamespace:    {}\nLabels:       <none>\nAnnotations:  <none>\nSpec:\n  PodSelector:     {}\n",
        policy::name(p),
        policy::namespace(p),
        selector_text(
            spec.pod_selector.as_ref(),
            "<none> (Allowing the specific traffic to all pods in this namespace)"
        )
    );
    let (ingress, egress) = policy::directions(p);
    if ingress {
        match spec.ingress.as_deref() {
            None | Some([]) => out.push_str("  Allowing ingress traffic:\n    <none> (Selected pods are isolated for ingress connectivity)\n"),
            Some(rules) => {
                out.push_str("  Allowing ingress traffic:\n");
                for (i, r) in rules.iter().enumerate() {
                    if i > 0 {
                        out.push_str("    ----------\n");
                    }
                    describe_ports(r.ports.as_deref(), "To", &mut out);
                    describe_peers(r.from.as_deref(), "From", "traffic not restricted by source", &mut out);
                }
            }
        }
    } else {
        out.push_str("  Not affecting ingress traffic\n");
    }
    if egress {
        match spec.egress.as_deref() {
            None | Some([]) => out.push_str("  Allowing egress traffic:\n    <none> (Selected pods are isolated for egress connectivity)\n"),
            Some(rules) => {
                out.push_str("  Allowing egress traffic:\n");
                for (i, r) in rules.iter().enumerate() {
                    if i > 0 {
                        out.push_str("    ----------\n");
                    }
                    describe_ports(r.ports.as_deref(), "To", &mut out);
                    describe_peers(r.to.as_deref(), "To", "traffic not restricted by destination", &mut out);
                }
            }
        }
    } else {
        out.push_str("  Not affecting egress traffic\n");
    }
    let mut types = Vec::new();
    if ingress {
        types.push("Ingress");
    }
    if egress {
        types.push("Egress");
    }
    out.push_str(&format!("  Policy Types: {}\n", types.join(", ")));
    out
}

/// A pod of the workload as a `v1/Pod` object (for `-o yaml`).
pub(crate) fn pod_object(p: &crate::model::PodInfo) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(p.name.clone()),
            namespace: Some(p.namespace.clone()),
            labels: Some(p.labels.clone()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                ports: (!p.ports.is_empty()).then(|| {
                    p.ports
                        .iter()
                        .map(|c| K8sPort {
                            container_port: i32::from(c.port),
                            name: c.name.clone(),
                            protocol: Some(c.protocol.as_str().into()),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some(p.ip.to_string()),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boutique;

    fn store() -> (Store, Workload) {
        (Store::new(&boutique::policies().expect("policies")), boutique::workload().expect("workload"))
    }

    #[test]
    fn get_lists_and_prints_yaml_that_applies_back_unchanged() {
        let (mut s, w) = store();
        let list = s.run("kubectl get networkpolicies", None, &w);
        assert!(list.ok && list.text.starts_with("NAME"), "{}", list.text);
        assert!(list.text.contains("adservice") && list.text.contains("app=adservice"), "{}", list.text);
        let yaml = s.run("get netpol adservice -o yaml", None, &w);
        assert!(yaml.ok && yaml.text.contains("kind: NetworkPolicy"), "{}", yaml.text);
        let back = s.run("apply -f -", Some(&yaml.text), &w);
        assert_eq!(back.text, "networkpolicy.networking.k8s.io/adservice unchanged\n");
        assert!(!back.changed);
        let pods = s.run("get pods -o wide --show-labels", None, &w);
        assert!(pods.text.contains("10.244.0.") && pods.text.contains("app=frontend"), "{}", pods.text);
        assert!(
            s.run("describe networkpolicy checkoutservice", None, &w)
                .text
                .contains("PodSelector: app=frontend")
        );
    }

    #[test]
    fn errors_read_as_kubectl_writes_them() {
        let (mut s, w) = store();
        let a = s.run("get networkpolicy nope", None, &w);
        assert!(!a.ok);
        assert_eq!(
            a.text,
            "Error from server (NotFound): networkpolicies.networking.k8s.io \"nope\" not found"
        );
        assert_eq!(s.run("get foo", None, &w).text, "error: the server doesn't have a resource type \"foo\"");
        let bad = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: x}\nspec:\n  podSelector: {}\n  ingress:\n  - ports: [{port: 80, protocol: ICMP}]\n";
        let a = s.run("apply -f -", Some(bad), &w);
        assert!(!a.ok && a.text.contains("The NetworkPolicy \"x\" is invalid"), "{}", a.text);
        assert!(
            a.text.contains("spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\""),
            "{}",
            a.text
        );
        let a = s.run("apply -f -", Some("kind: NetworkPolicy\nmetadata: {name: x\n"), &w);
        assert!(!a.ok && a.text.starts_with("error: error parsing STDIN"), "{}", a.text);
        let a = s.run("delete pod frontend", None, &w);
        assert!(!a.ok && a.text.contains("Forbidden"), "{}", a.text);
        assert!(s.run("get networkpolicy x", None, &w).text.contains("not found"), "nothing was applied");
        assert!(!s.run("exec -it frontend -- sh", None, &w).ok);
        assert!(!s.run("get pods; rm -rf /", None, &w).ok);
    }

    #[test]
    fn patch_and_delete_change_the_store() {
        let (mut s, w) = store();
        let a = s.run(
            r#"patch networkpolicy adservice --type json -p '[{"op":"replace","path":"/spec/ingress/0/ports/0/port","value":9556}]'"#,
            None,
            &w,
        );
        assert!(a.ok && a.changed, "{}", a.text);
        assert!(s.run("get netpol adservice -o yaml", None, &w).text.contains("port: 9556"));
        let a = s.run(r#"patch networkpolicy adservice -p '{"spec":{"policyTypes":["Bogus"]}}'"#, None, &w);
        assert!(!a.ok && a.text.contains("spec.policyTypes[0]: Unsupported value: \"Bogus\""), "{}", a.text);
        let a = s.run("delete networkpolicy adservice", None, &w);
        assert_eq!(a.text, "networkpolicy.networking.k8s.io \"adservice\" deleted\n");
        assert_eq!(s.policies().len(), 11);
    }

    /// `policyTypes: []` is defaulted by the API server like an absent list, so emptying it
    /// keeps the Online Boutique as closed as it was.
    #[test]
    fn emptying_policy_types_opens_nothing() {
        let (mut s, w) = store();
        let targets = crate::engine::targets(&w);
        let before = crate::engine::truth_table(&s.policies(), &w, &targets);
        let a = s.run(
            r#"patch networkpolicy cartservice --type merge -p '{"spec":{"policyTypes":[]}}'"#,
            None,
            &w,
        );
        assert!(a.ok, "{}", a.text);
        assert_eq!(crate::engine::truth_table(&s.policies(), &w, &targets), before);
    }
}

//! netdojo-gns3's tests: the API client on recorded answers, the console and dialects on
//! recorded transcripts, and the environment against a real GNS3 server.
//!
//! The `server` tests need a GNS3 server: `bash .ci/gns3-server.sh start DIR` starts one and
//! writes its URL to DIR/url; export it as NETDOJO_GNS3_URL. Without it these tests print why
//! and pass, unless `CI` is set: there they fail.

mod common {
    use std::path::PathBuf;

    pub fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    pub fn data(name: &str) -> String {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    pub fn transcript(name: &str) -> Vec<u8> {
        let path = repo_root().join("testdata/gns3/transcripts").join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The GNS3 server of the tests, or None (with the reason printed) off CI.
    pub fn server_url(what: &str) -> Option<String> {
        netdojo_testkit::env_or_skip(
            "NETDOJO_GNS3_URL",
            what,
            "start a server: bash .ci/gns3-server.sh start DIR; .ci/run does",
        )
    }
}

/// The API client against a small HTTP responder that answers as GNS3 did (recorded bodies).
mod api {
    use std::sync::{Arc, Mutex};

    use netdojo_gns3::api::{ApiVersion, Credentials, Gns3Client, Gns3Error, Node};
    use reqwest::{Method, StatusCode};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::common::data;

    /// One request as the responder saw it.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        path: String,
        auth: Option<String>,
        body: String,
    }

    type Handler = Box<dyn Fn(&Seen, usize) -> (u16, String) + Send + Sync>;

    /// Serves HTTP/1.1 on 127.0.0.1, one request per connection, answering with `handler`.
    async fn responder(handler: Handler) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = stream.read(&mut chunk).await.expect("read");
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_string())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if body.len() >= len {
                            break (head.to_string(), body.to_string());
                        }
                    }
                };
                let mut words = head.split_whitespace();
                let method = words.next().unwrap_or_default().to_string();
                let path = words.next().unwrap_or_default().to_string();
                let auth = head.lines().find_map(|l| {
                    l.to_ascii_lowercase().starts_with("authorization:").then(|| l[14..].trim().to_string())
                });
                let req = Seen { method, path, auth, body };
                let n = {
                    let mut seen = log.lock().expect("lock");
                    seen.push(req.clone());
                    seen.len()
                };
                let (status, body) = handler(&req, n);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        (url, seen)
    }

    #[tokio::test]
    async fn v3_logs_in_and_logs_in_again_when_the_token_expires() {
        let (url, seen) = responder(Box::new(|req, _| {
            match (req.method.as_str(), req.path.as_str(), req.auth.as_deref()) {
                ("GET", "/v3/version", _) => {
                    (200, r#"{"controller_host":"127.0.0.1","version":"3.0.6","local":true}"#.into())
                }
                ("POST", "/v3/access/users/authenticate", _) => {
                    // A new token each login.
                    let n = req.body.len();
                    (200, format!(r#"{{"access_token":"tok{n}x","token_type":"bearer"}}"#))
                }
                ("GET", "/v3/projects", Some(auth)) if auth.starts_with("Bearer tok") => {
                    (200, format!("[{}]", data("project.json")))
                }
                _ => (401, r#"{"message":"Not authenticated"}"#.into()),
            }
        }))
        .await;
        let client = Gns3Client::connect(&url, Credentials::default()).await.expect("connect");
        assert_eq!(client.api(), ApiVersion::V3);
        assert_eq!(client.server().version, "3.0.6");
        let projects = client.projects().await.expect("projects");
        assert_eq!(projects[0].name, "rec1");
        let log = seen.lock().expect("lock").clone();
        let login = log.iter().find(|r| r.path == "/v3/access/users/authenticate").expect("logged in");
        assert_eq!(login.body, r#"{"username":"admin","password":"admin"}"#);
        let listed = log.iter().find(|r| r.path == "/v3/projects").expect("listed");
        assert!(listed.auth.as_deref().is_some_and(|a| a.starts_with("Bearer tok")), "{listed:?}");
    }

    #[tokio::test]
    async fn an_expired_token_is_renewed_once() {
        // Each login's token is named after the request that got it: t2 is the first.
        let (url, seen) = responder(Box::new(|req, n| match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/v3/version") => (200, r#"{"version":"3.0.6","local":true}"#.into()),
            ("POST", "/v3/access/users/authenticate") => {
                (200, format!(r#"{{"access_token":"t{n}","token_type":"bearer"}}"#))
            }
            ("GET", "/v3/templates") if req.auth.as_deref() == Some("Bearer t2") => {
                (401, r#"{"message":"Not authenticated"}"#.into())
            }
            ("GET", "/v3/templates") => (200, data("templates.json")),
            ("GET", "/v3/projects") => (401, r#"{"message":"Not authenticated"}"#.into()),
            _ => (404, r#"{"message":"no"}"#.into()),
        }))
        .await;
        let client = Gns3Client::connect(&url, Credentials::default()).await.expect("connect");
        let templates = client.templates().await.expect("templates after a new login");
        assert_eq!(templates.len(), 7);
        // A server that keeps refusing: one new login, then the error, no loop.
        let err = client.projects().await.expect_err("always 401");
        assert_eq!(err.status(), Some(401));
        assert!(
            err.to_string().contains("GNS3 GET /v3/projects: 401: Unauthorized: Not authenticated"),
            "{err}"
        );
        let log = seen.lock().expect("lock").clone();
        let calls: Vec<String> =
            log.iter().map(|r| format!("{} {}", r.path, r.auth.as_deref().unwrap_or("-"))).collect();
        assert_eq!(
            calls,
            vec![
                "/v3/version -",
                "/v3/access/users/authenticate -",
                "/v3/templates Bearer t2",
                "/v3/access/users/authenticate -",
                "/v3/templates Bearer t4",
                "/v3/projects Bearer t4",
                "/v3/access/users/authenticate -",
                "/v3/projects Bearer t7",
            ]
        );
    }

    #[tokio::test]
    async fn v2_is_chosen_when_v3_is_absent_and_sends_no_token() {
        let (url, seen) = responder(Box::new(|req, _| match req.path.as_str() {
            "/v2/version" => (200, r#"{"local":true,"version":"2.2.61"}"#.into()),
            "/v2/templates" => (200, data("templates.json")),
            _ => (404, r#"{"message":"Not found"}"#.into()),
        }))
        .await;
        let client = Gns3Client::connect(&url, Credentials::default()).await.expect("connect");
        assert_eq!(client.api(), ApiVersion::V2);
        let templates = client.templates().await.expect("templates");
        assert!(templates.iter().any(|t| t.name == "VPCS" && t.template_type == "vpcs"));
        let log = seen.lock().expect("lock").clone();
        assert!(log.iter().all(|r| r.auth.is_none() && !r.path.contains("authenticate")), "{log:?}");
    }

    #[tokio::test]
    async fn a_wrong_password_names_the_user_and_the_servers_message() {
        let (url, _) = responder(Box::new(|req, _| match req.path.as_str() {
            "/v3/version" => (200, r#"{"version":"3.0.6","local":true}"#.into()),
            _ => (401, r#"{"message":"Authentication was unsuccessful."}"#.into()),
        }))
        .await;
        let creds = Credentials { username: "admin".into(), password: "nope".into() };
        let err = Gns3Client::connect(&url, creds).await.expect_err("refused");
        assert!(matches!(err, Gns3Error::Auth { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "GNS3 server {url}: authentication of user `admin` failed: Unauthorized: Authentication was unsuccessful."
            )
        );
    }

    #[test]
    fn http_errors_carry_the_servers_message() {
        // Bodies as GNS3 3.0.6 answered them.
        let cases = [
            (
                404,
                r#"{"message":"Project ID 00000000-0000-0000-0000-000000000000 doesn't exist"}"#,
                "404: Not Found: Project ID 00000000-0000-0000-0000-000000000000 doesn't exist",
            ),
            (
                409,
                r#"{"message":"Project \"rec1\" already exists"}"#,
                "409: Conflict: Project \"rec1\" already exists",
            ),
            (409, r#"{"message":"Port is already used"}"#, "409: Conflict: Port is already used"),
            (401, r#"{"message":"Not authenticated"}"#, "401: Unauthorized: Not authenticated"),
            (500, "Internal Server Error", "500: Internal Server Error: Internal Server Error"),
        ];
        for (status, body, expected) in cases {
            let err = Gns3Error::from_response(
                &Method::POST,
                "/v3/projects",
                StatusCode::from_u16(status).expect("status"),
                body,
            );
            assert_eq!(err.to_string(), format!("GNS3 POST /v3/projects: {expected}"));
            assert_eq!(err.status(), Some(status));
        }
        // A 422 keeps the validation message and drops the server's traceback.
        let body = r#"{"message":"1 validation error:\n  {'type': 'enum', 'loc': ('body', 'node_type'), 'msg': \"Input should be 'cloud', 'nat' or 'vpcs'\", 'input': 'nonsense'}\n\n  File \"/venv/lib/python3.11/site-packages/gns3server/api/routes/controller/nodes.py\", line 108, in create_node\n    POST /v3/projects/{project_id}/nodes"}"#;
        let err = Gns3Error::from_response(
            &Method::POST,
            "/v3/projects/p/nodes",
            StatusCode::UNPROCESSABLE_ENTITY,
            body,
        )
        .to_string();
        assert!(
            err.starts_with("GNS3 POST /v3/projects/p/nodes: 422: Unprocessable Entity: 1 validation error:"),
            "{err}"
        );
        assert!(err.contains("'input': 'nonsense'"), "{err}");
        assert!(!err.contains("File \""), "{err}");
    }

    #[test]
    fn recorded_nodes_give_ports_and_consoles() {
        let nodes: Vec<Node> = serde_json::from_str(&data("nodes.json")).expect("nodes.json");
        let pc = nodes.iter().find(|n| n.node_type == "vpcs").expect("a vpcs node");
        assert_eq!(pc.port("e0").map(|p| (p.adapter_number, p.port_number)), Some((0, 0)));
        assert_eq!(pc.port("Ethernet0").map(|p| p.name.as_str()), Some("Ethernet0"));
        assert!(pc.port("e1").is_none());
        assert_eq!(pc.telnet_console("10.9.9.9"), Some(("127.0.0.1".to_string(), 5000)));
        let switch: Node = serde_json::from_str(&data("switch.json")).expect("switch.json");
        assert_eq!(switch.port("e7").map(|p| p.port_number), Some(7));
        assert_eq!(switch.telnet_console("127.0.0.1"), None, "a switch has no console");
    }
}

/// The console driver and the dialects against recorded sessions, replayed by a TCP server
/// that answers each line it receives with the next part of the transcript.
/// The client held against the server's OpenAPI document (GNS3 3.0.6's `/openapi.json`, kept
/// in tests/data): every endpoint the client calls exists with its method, every body it
/// sends follows the request schema, every recorded answer follows the response schema, and
/// every field the client's types require is one the document promises.
mod openapi {
    use netdojo_gns3::api::{LinkEnd, body, endpoints};
    use serde_json::{Value, json};

    use super::common::data;

    fn document() -> Value {
        serde_json::from_str(&data("openapi-3.0.6.json")).expect("openapi-3.0.6.json is JSON")
    }

    fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.trim_start_matches("#/components/schemas/");
                &doc["components"]["schemas"][name]
            }
            None => schema,
        }
    }

    /// The places where `value` breaks `schema` (properties, required, types, enums, through
    /// `$ref`, `anyOf`, `allOf` and array items): a small validator for what GNS3's document
    /// uses. Unknown properties are errors even where the server would ignore them: a field
    /// the server ignores is a field the client believes it set.
    fn violations(doc: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
        let schema = resolve(doc, schema);
        if let Some(branches) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array)
        {
            let all: Vec<Vec<String>> = branches.iter().map(|b| violations(doc, b, value, at)).collect();
            return match all.iter().any(Vec::is_empty) {
                true => vec![],
                false => vec![format!("{at}: {value} matches no branch: {all:?}")],
            };
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            return parts.iter().flat_map(|p| violations(doc, p, value, at)).collect();
        }
        let mut out = Vec::new();
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            out.push(format!("{at}: {value} is not one of {options:?}"));
        }
        let ty = schema.get("type").and_then(Value::as_str);
        let type_ok = match ty {
            None => true,
            Some("object") => value.is_object(),
            Some("array") => value.is_array(),
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some("null") => value.is_null(),
            Some(other) => panic!("{at}: schema type {other} not handled"),
        };
        if !type_ok {
            out.push(format!("{at}: {value} is not of type {}", ty.unwrap_or("?")));
            return out;
        }
        if let (Some(props), Some(obj)) =
            (schema.get("properties").and_then(Value::as_object), value.as_object())
        {
            for (k, v) in obj {
                match props.get(k) {
                    Some(p) => out.extend(violations(doc, p, v, &format!("{at}.{k}"))),
                    None if schema.get("additionalProperties") == Some(&Value::Bool(true)) => {}
                    None => out.push(format!("{at}.{k}: not a property of the schema")),
                }
            }
            for r in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(r) = r.as_str()
                    && !obj.contains_key(r)
                {
                    out.push(format!("{at}.{r}: required, missing"));
                }
            }
        }
        if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
            for (i, v) in list.iter().enumerate() {
                out.extend(violations(doc, items, v, &format!("{at}[{i}]")));
            }
        }
        out
    }

    fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
        let op = &doc["paths"][format!("/v3{path}")][method.to_lowercase()];
        assert!(op.is_object(), "{method} /v3{path} is not in the document");
        op
    }

    fn request_schema(op: &Value) -> Option<&Value> {
        op.get("requestBody").map(|b| &b["content"]["application/json"]["schema"])
    }

    /// The schema of the first 2xx answer, unwrapped from an array (`items`).
    fn answer_schema<'a>(doc: &'a Value, op: &'a Value) -> Option<&'a Value> {
        let responses = op["responses"].as_object()?;
        let (_, ok) = responses.iter().find(|(code, _)| code.starts_with('2'))?;
        let schema = ok.get("content")?.get("application/json")?.get("schema")?;
        Some(resolve(doc, schema.get("items").unwrap_or(schema)))
    }

    #[test]
    fn the_validator_catches_a_misspelt_field_a_wrong_type_and_a_missing_one() {
        let doc = document();
        let schema = json!({"$ref": "#/components/schemas/NodeCreate"});
        let ok = body::create_node("PC1", "vpcs", &Value::Null);
        assert!(violations(&doc, &schema, &ok, "body").is_empty());
        let bad = json!({"name": "PC1", "node_typ": "vpcs", "compute_id": 3});
        let found = violations(&doc, &schema, &bad, "body").join("\n");
        assert!(found.contains("body.node_typ: not a property"), "{found}");
        assert!(found.contains("body.compute_id: 3 matches no branch"), "{found}");
        assert!(found.contains("body.node_type: required, missing"), "{found}");
        let bad = body::create_node("PC1", "vpcsx", &Value::Null);
        assert!(!violations(&doc, &schema, &bad, "body").is_empty(), "an unknown node type");
    }

    #[test]
    fn every_endpoint_the_client_calls_is_in_the_document_with_its_body_and_answer() {
        let doc = document();
        for ep in endpoints::ALL {
            let op = operation(&doc, ep.method.as_str(), ep.path);
            let what = format!("{} {}", ep.method, ep.path);
            assert_eq!(request_schema(op).is_some(), ep.json_body, "{what}: JSON body or not");
            match ep.response {
                Some(name) => {
                    let schema =
                        answer_schema(&doc, op).unwrap_or_else(|| panic!("{what}: no answer schema"));
                    assert_eq!(schema, &doc["components"]["schemas"][name], "{what}: answers {name}");
                }
                None => assert!(
                    answer_schema(&doc, op).is_none_or(|s| s.as_object().is_some_and(|o| o.is_empty())),
                    "{what}: an answer the client ignores"
                ),
            }
        }
    }

    #[test]
    fn the_bodies_the_client_sends_follow_their_request_schemas() {
        let doc = document();
        let ends = [
            LinkEnd {
                node_id: "c73f72ce-a40f-44cf-976d-ce2fd12a7d38".into(),
                adapter_number: 0,
                port_number: 0,
            },
            LinkEnd {
                node_id: "bf3e5123-e866-4cfd-ab4a-e46858147d5a".into(),
                adapter_number: 0,
                port_number: 1,
            },
        ];
        let switch_ports =
            json!({"ports_mapping": [{"name": "Ethernet0", "port_number": 0, "type": "access", "vlan": 1}]});
        let bodies = [
            (&endpoints::AUTHENTICATE, body::authenticate("admin", "admin")),
            (&endpoints::CREATE_PROJECT, body::create_project("netdojo-x")),
            (&endpoints::CREATE_NODE_FROM_TEMPLATE, body::create_node_from_template(100, -50)),
            (&endpoints::CREATE_NODE, body::create_node("PC1", "vpcs", &Value::Null)),
            (&endpoints::CREATE_NODE, body::create_node("SW1", "ethernet_switch", &switch_ports)),
            (&endpoints::UPDATE_NODE, body::update_node("PC1", &json!({}))),
            (
                &endpoints::UPDATE_NODE,
                body::update_node("R1", &json!({"startup_config_content": "hostname R1"})),
            ),
            (&endpoints::CREATE_LINK, body::create_link(&ends)),
            (&endpoints::START_NODE, body::start_node()),
        ];
        for ep in endpoints::ALL.iter().filter(|e| e.json_body) {
            assert!(
                bodies.iter().any(|(b, _)| b.path == ep.path && b.method == ep.method),
                "{} {}: no body checked",
                ep.method,
                ep.path
            );
        }
        for (ep, value) in &bodies {
            let schema =
                request_schema(operation(&doc, ep.method.as_str(), ep.path)).expect("request schema");
            let found = violations(&doc, schema, value, "body");
            assert!(found.is_empty(), "{} {}: {value}: {found:#?}", ep.method, ep.path);
        }
    }

    #[test]
    fn recorded_answers_follow_their_schemas_and_the_client_requires_only_what_they_promise() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        for (file, schema) in [
            ("project.json", "Project"),
            ("templates.json", "Template"),
            ("node.json", "Node"),
            ("nodes.json", "Node"),
            ("switch.json", "Node"),
            ("link.json", "Link"),
        ] {
            let value: Value = serde_json::from_str(&data(file)).expect("recorded answer is JSON");
            let items = match value {
                Value::Array(list) => list,
                one => vec![one],
            };
            for (i, item) in items.iter().enumerate() {
                let found = violations(&doc, &schemas[schema], item, &format!("{file}[{i}]"));
                assert!(found.is_empty(), "{found:#?}");
            }
        }
        // The fields netdojo's types cannot do without, against the document's `required`.
        // Node.node_id is the one the document leaves optional (the model is shared with node
        // creation); the server always assigns it, and a node without one is unusable.
        for (schema, fields) in [
            ("Version", &["version"][..]),
            ("Token", &["access_token"]),
            ("Project", &["project_id"]),
            ("Template", &["template_id", "name", "template_type"]),
            ("Node", &["name", "node_type"]),
            ("NodePort", &["name", "adapter_number", "port_number"]),
            ("Link", &["link_id"]),
            ("LinkNode", &["node_id", "adapter_number", "port_number"]),
        ] {
            let required = schemas[schema]["required"].as_array().expect("required");
            for f in fields {
                assert!(
                    required.contains(&json!(f)),
                    "{schema}.{f}: the client requires it, the document does not"
                );
            }
        }
        // And the client decodes an answer that has only what the document requires.
        let minimal = json!({"project_id": "p"});
        serde_json::from_value::<netdojo_gns3::api::Project>(minimal).expect("a Project with only its id");
        let minimal = json!({"link_id": "l"});
        serde_json::from_value::<netdojo_gns3::api::Link>(minimal).expect("a Link with only its id");
    }
}

mod console {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use netdojo_gns3::CliDialect;
    use netdojo_gns3::device::Device;
    use netdojo_gns3::dialect::{clean_output, last_prompt};
    use netdojo_gns3::telnet::{ConsoleError, TelnetParser, prompt_end};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::common::transcript;

    /// The transcript cut after each prompt: part 0 answers the first Enter, part i the i-th
    /// line received after it. The lines received are kept to be checked.
    fn parts(raw: &[u8], dialect: CliDialect) -> Vec<Vec<u8>> {
        let mut parser = TelnetParser::default();
        let mut parts = Vec::new();
        let mut start = 0;
        for end in 1..=raw.len() {
            // Cut only where the text so far ends with a prompt and the next byte starts a
            // new echo (not the space after a prompt).
            let (text, _) = parser.clone().feed(&raw[start..end]);
            let text = String::from_utf8_lossy(&text);
            if prompt_end(&text, dialect.prompt()).is_some() && raw.get(end) != Some(&b' ') {
                parts.push(raw[start..end].to_vec());
                start = end;
                parser = TelnetParser::default();
            }
        }
        assert_eq!(start, raw.len(), "the transcript must end with a prompt");
        parts
    }

    async fn replay(parts: Vec<Vec<u8>>) -> (u16, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let log = lines.clone();
        tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let mut next = parts.into_iter();
            let mut pending = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                let Ok(n) = stream.read(&mut buf).await else { return };
                if n == 0 {
                    return;
                }
                pending.extend_from_slice(&buf[..n]);
                // Telnet answers (IAC ...) are not lines.
                let (data, _) = TelnetParser::default().feed(&pending);
                let text = String::from_utf8_lossy(&data).to_string();
                let mut consumed_lines = Vec::new();
                let mut rest = text.as_str();
                while let Some(i) = rest.find("\r\n") {
                    consumed_lines.push(rest[..i].to_string());
                    rest = &rest[i + 2..];
                }
                if consumed_lines.is_empty() {
                    continue;
                }
                pending.clear();
                pending.extend_from_slice(rest.as_bytes());
                for line in consumed_lines {
                    log.lock().expect("lock").push(line);
                    match next.next() {
                        Some(part) => {
                            if stream.write_all(&part).await.is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            }
        });
        (port, lines)
    }

    #[test]
    fn vpcs_outputs_parse() {
        let raw = transcript("vpcs-session.raw");
        let (data, _) = TelnetParser::default().feed(&raw);
        let text = String::from_utf8_lossy(&data).to_string();
        let dialect = CliDialect::Vpcs;
        let show: String = text.split("\rPC2> ").next().expect("first").to_string() + "\rPC2> ";
        assert_eq!(last_prompt(&show), "PC2>");
        let out = clean_output(&show, "show ip");
        assert!(out.starts_with("NAME        : PC2[1]"), "{out}");
        assert_eq!(dialect.running_config(&out), "ip 10.0.0.2/24\n");
        let with_gateway = out.replace("GATEWAY     : 0.0.0.0", "GATEWAY     : 10.0.0.254");
        assert_eq!(dialect.running_config(&with_gateway), "ip 10.0.0.2/24 10.0.0.254\n");
        assert_eq!(
            dialect.error_in("Bad command: \"bogus\". Use ? for help."),
            Some("Bad command: \"bogus\". Use ? for help.".into())
        );
        assert_eq!(dialect.error_in("Invalid host address"), Some("Invalid host address".into()));
        assert_eq!(
            dialect.error_in(
                "Checking for duplicate address...\nPC1 : 10.0.0.9 255.255.255.0 gateway 10.0.0.254"
            ),
            None
        );
        assert!(dialect.refuse_exec("ping 10.0.0.1 -c 2").is_none());
        assert!(dialect.refuse_exec("save /etc/passwd").is_some());
        assert!(dialect.refuse_config("load /etc/passwd").is_some());
        assert!(dialect.refuse_config("set lport 1").is_some());
        assert!(dialect.refuse_config("ip 10.0.0.1/24 10.0.0.254").is_none());
    }

    #[test]
    fn ios_errors_and_modes_parse() {
        let d = CliDialect::Ios;
        for prompt in ["R1>", "R1#", "R1(config)#", "R1(config-if)#", "core-1.lab(config-router)#"] {
            assert!(prompt_end(prompt, d.prompt()).is_some(), "{prompt}");
        }
        assert!(prompt_end("% Invalid input detected at '^' marker.", d.prompt()).is_none());
        assert!(d.in_config_mode("R1(config-if)#") && !d.in_config_mode("R1#"));
        assert!(d.needs_enable("R1>") && !d.needs_enable("R1#"));
        let invalid = "      ^\n% Invalid input detected at '^' marker.";
        assert_eq!(d.error_in(invalid).as_deref(), Some("^\n% Invalid input detected at '^' marker."));
        assert_eq!(d.error_in("% Incomplete command.").as_deref(), Some("% Incomplete command."));
        assert!(d.error_in("% Ambiguous command:  \"i\"").is_some());
        assert!(
            d.error_in(
                "Translating \"shw\"\n% Unknown command or computer name, or unable to find computer address"
            )
            .is_some()
        );
        assert!(d.error_in("Enter configuration commands, one per line.  End with CNTL/Z.").is_none());
        assert!(d.refuse_exec("show running-config").is_none());
        assert!(d.refuse_exec("show running-config | redirect flash:x").is_some());
        assert!(d.refuse_exec("reload").is_some());
        assert!(d.refuse_exec("configure terminal").is_some());
        assert!(d.refuse_config("do reload").is_some());
        assert!(d.refuse_config("do show ip route").is_none());
        assert!(d.is_framing("conf t") && d.is_framing("end"));
    }

    #[test]
    fn restore_commands_take_a_configuration_back() {
        let vpcs = CliDialect::Vpcs;
        assert_eq!(
            vpcs.restore_commands("ip 10.0.0.9/24\n", "ip 10.0.0.2/24 10.0.0.254\n")
                .expect("restore commands"),
            ["ip 10.0.0.2/24 10.0.0.254"]
        );
        assert_eq!(vpcs.restore_commands("ip 10.0.0.9/24\n", "").expect("restore commands"), ["clear ip"]);
        let ios = CliDialect::Ios;
        let before = "!\nversion 12.4\nhostname R1\n!\ninterface FastEthernet0/0\n ip address 10.0.12.1 255.255.255.252\n no shutdown\n!\nip route 2.2.2.0 255.255.255.252 10.0.12.2\nend\n";
        let after = "!\nversion 12.4\nhostname R1\n!\ninterface FastEthernet0/0\n ip address 10.0.13.1 255.255.255.252\n no shutdown\n!\ninterface Loopback0\n ip address 1.1.1.1 255.255.255.255\n!\nend\n";
        // From `after` back to `before`: the loopback removed, the old address back, the route back.
        let commands = ios.restore_commands(after, before).expect("restore commands");
        assert_eq!(
            commands,
            [
                "no interface Loopback0",
                "interface FastEthernet0/0",
                "no ip address 10.0.13.1 255.255.255.252",
                "exit",
                "interface FastEthernet0/0",
                "ip address 10.0.12.1 255.255.255.252",
                "exit",
                "ip route 2.2.2.0 255.255.255.252 10.0.12.2",
            ]
        );
        assert!(ios.restore_commands(after, after).expect("restore commands").is_empty());
        let ospf = ios
            .restore_commands(
                "router ospf 1\n!\nend\n",
                "router ospf 1\n network 10.0.0.0 0.0.0.255 area 0\n!\nend\n",
            )
            .expect("restore commands");
        assert_eq!(ospf, ["router ospf 1", "network 10.0.0.0 0.0.0.255 area 0", "exit"]);
        // IOS sections netdojo-config has no keyword for, and a banner, go back as typed.
        let vrf = ios
            .restore_commands(
                "ip vrf RED\n rd 1:1\n!\nbanner motd ^C\nKeep out\n^C\nend\n",
                "ip vrf RED\n rd 1:1\n route-target export 1:1\n!\nbanner motd ^C\nKeep out # now\n^C\nend\n",
            )
            .expect("restore commands");
        assert_eq!(
            vrf,
            [
                "no banner motd",
                "ip vrf RED",
                "route-target export 1:1",
                "exit",
                "banner motd %Keep out # now%"
            ]
        );
    }

    #[tokio::test]
    async fn an_ios_session_logs_in_configures_and_reads_back() {
        let (port, lines) = replay(parts(&transcript("ios-session.raw"), CliDialect::Ios)).await;
        let mut dev = Device::open("R1", CliDialect::Ios, "127.0.0.1", port, Duration::from_secs(5))
            .await
            .expect("login");
        let commands: Vec<String> = [
            "configure terminal",
            "interface FastEthernet0/0",
            "ip address 10.0.12.1 255.255.255.252",
            "no shutdown",
            "exit",
            "ip route 2.2.2.0 255.255.255.252",
            "ip route 2.2.2.0 255.255.255.252 10.0.12.2",
            "ip rooute 2.2.2.0 255.255.255.252 10.0.12.2",
            "i",
            "end",
        ]
        .map(String::from)
        .to_vec();
        let results = dev.configure(&commands).await.expect("configure");
        let status: Vec<(&str, &str)> = results.iter().map(|r| (r.command.as_str(), r.status)).collect();
        assert_eq!(
            status,
            vec![
                ("configure terminal", "success"),
                ("interface FastEthernet0/0", "success"),
                ("ip address 10.0.12.1 255.255.255.252", "success"),
                ("no shutdown", "success"),
                ("exit", "success"),
                ("ip route 2.2.2.0 255.255.255.252", "error"),
                ("ip route 2.2.2.0 255.255.255.252 10.0.12.2", "success"),
                ("ip rooute 2.2.2.0 255.255.255.252 10.0.12.2", "error"),
                ("i", "error"),
                ("end", "success"),
            ]
        );
        assert_eq!(results[5].error, "% Incomplete command.");
        assert_eq!(results[7].error, "^\n% Invalid input detected at '^' marker.");
        let running = dev.running_config().await.expect("show running-config");
        assert!(running.starts_with("!\nversion 12.4\n"), "{running}");
        assert!(
            running.contains("interface FastEthernet0/0\n ip address 10.0.12.1 255.255.255.252\n"),
            "{running}"
        );
        assert!(running.ends_with("end\n"), "{running}");
        let (route, prompt) = dev.run("show ip route 2.2.2.0 255.255.255.252").await.expect("show");
        assert!(route.starts_with("Routing entry for 2.2.2.0/30\n  Known via \"static\""), "{route}");
        assert_eq!(prompt, "R1#");
        let (out, _) = dev.run("shw ip route").await.expect("typo");
        assert!(CliDialect::Ios.error_in(&out).is_some_and(|e| e.starts_with("% Unknown command")), "{out}");
        // What the device received: Enter, enable, pagination off, then each command once
        // (`configure terminal` and `end` of the batch are the driver's own, not resent).
        let sent = lines.lock().expect("lock").clone();
        assert_eq!(&sent[..4], &["", "enable", "terminal length 0", "terminal width 0"]);
        assert_eq!(sent.iter().filter(|l| l.as_str() == "configure terminal").count(), 1);
        assert_eq!(sent.iter().filter(|l| l.as_str() == "end").count(), 1);
    }

    #[tokio::test]
    async fn a_console_that_never_prompts_times_out_with_what_it_saw() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let _ = s.write_all(b"\xff\xfb\x01Booting image...\r\n").await;
            tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let err = Device::open("R9", CliDialect::Ios, "127.0.0.1", port, Duration::from_millis(1500))
            .await
            .expect_err("no prompt");
        assert!(matches!(err, ConsoleError::Timeout { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("console 127.0.0.1:{port}: no prompt after 1.5s")), "{text}");
        assert!(text.contains("Booting image..."), "{text}");
    }
}

/// The environment on a real GNS3 server.
mod server {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use netdojo_core::{
        ConfigTask, ConfigTopology, EnvironmentFactory, StaticSuite, Task, TaskKind, TaskSource, Testcase,
        ToolCall,
    };
    use netdojo_gns3::api::{Credentials, Gns3Client};
    use netdojo_gns3::{Gns3Factory, Gns3Options};
    use serde_json::json;

    use super::common::{repo_root, server_url};

    async fn project_names(url: &str) -> Vec<String> {
        let client = Gns3Client::connect(url, Credentials::default()).await.expect("connect");
        client.projects().await.expect("projects").into_iter().map(|p| p.name).collect()
    }

    /// What the client relies on in the document it is held against
    /// (tests/data/openapi-3.0.6.json) is what the pinned server serves: the operations of
    /// every endpoint it calls and every schema they reach. When the server moves on, this says
    /// where the two differ, and to refresh the stored document.
    #[tokio::test]
    async fn the_server_serves_the_openapi_document_the_client_is_checked_against() {
        use netdojo_gns3::api::endpoints;
        use serde_json::Value;

        let Some(url) = server_url("the_server_serves_the_openapi_document_the_client_is_checked_against")
        else {
            return;
        };
        // Connecting also installs the TLS crypto provider reqwest needs to build a client.
        let client = Gns3Client::connect(&url, Credentials::default()).await.expect("connect");
        let served: Value = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("http client")
            .get(format!("{}/openapi.json", client.url()))
            .send()
            .await
            .expect("GET /openapi.json")
            .json()
            .await
            .expect("JSON");
        let stored: Value = serde_json::from_str(&super::common::data("openapi-3.0.6.json")).expect("JSON");
        assert_eq!(served["info"]["version"], stored["info"]["version"], "server version");

        /// The first place where `a` and `b` differ, lists compared as sets (the server builds
        /// some from Python sets, whose order is not fixed).
        fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
            match (a, b) {
                (Value::Object(x), Value::Object(y)) => {
                    x.keys().chain(y.keys()).find_map(|k| match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => first_difference(p, q, &format!("{at}/{k}")),
                        _ => Some(format!("{at}/{k}: in only one of them")),
                    })
                }
                (Value::Array(x), Value::Array(y)) => {
                    let key = |v: &Vec<Value>| {
                        let mut s: Vec<String> = v.iter().map(Value::to_string).collect();
                        s.sort();
                        s
                    };
                    (key(x) != key(y)).then(|| format!("{at}: {a} / {b}"))
                }
                _ => (a != b).then(|| format!("{at}: {a} / {b}")),
            }
        }
        /// `v` with every `$ref` replaced by what it names, to a fixed depth (schemas can be
        /// recursive): the server names two same-named enums of different modules differently
        /// from one process to the next (`LinkType` or `gns3server__schemas__…__LinkType`), so
        /// names are not compared, only what they stand for.
        fn inlined(doc: &Value, v: &Value, depth: usize) -> Value {
            match v {
                Value::Object(m) => match m.get("$ref").and_then(Value::as_str) {
                    Some(r) if depth > 0 => {
                        let name = r.trim_start_matches("#/components/schemas/");
                        inlined(doc, &doc["components"]["schemas"][name], depth - 1)
                    }
                    Some(_) => Value::Null,
                    // Prose is not the contract, and it moves: GNS3 has two `LinkType` enums
                    // (same values, different descriptions) and which one a link refers to
                    // changes from one server process to the next.
                    None => Value::Object(
                        m.iter()
                            .filter(|(k, _)| !matches!(k.as_str(), "description" | "title"))
                            .map(|(k, x)| (k.clone(), inlined(doc, x, depth)))
                            .collect(),
                    ),
                },
                Value::Array(a) => Value::Array(a.iter().map(|x| inlined(doc, x, depth)).collect()),
                other => other.clone(),
            }
        }
        let mut differences = Vec::new();
        for ep in endpoints::ALL {
            let pointer =
                format!("/paths/~1v3{}/{}", ep.path.replace('/', "~1"), ep.method.as_str().to_lowercase());
            match (served.pointer(&pointer), stored.pointer(&pointer)) {
                (Some(s), Some(d)) => differences.extend(first_difference(
                    &inlined(&served, s, 8),
                    &inlined(&stored, d, 8),
                    &pointer,
                )),
                _ => differences.push(format!("{pointer}: missing from the served document")),
            }
        }
        assert!(
            differences.is_empty(),
            "GNS3 {} serves a document that differs from crates/netdojo-gns3/tests/data/openapi-3.0.6.json \
             where the client relies on it; refresh it (curl {url}/openapi.json):\n{}",
            client.server().version,
            differences.join("\n")
        );
    }

    fn two_hosts(startup_pc2: &str) -> Task {
        let config = ConfigTask {
            task_name: "two hosts".into(),
            intents: vec!["PC1 and PC2 reach each other".into()],
            topology: ConfigTopology {
                nodes: vec!["PC1".into(), "PC2".into(), "SW1".into()],
                links: vec!["PC1 e0 <-> SW1 e0".into(), "PC2 e0 <-> SW1 e1".into()],
            },
            startup_configs: [("PC2".to_string(), startup_pc2.to_string())].into(),
            ground_truth_configs: [("PC1".to_string(), vec!["ip 10.0.0.1/24".to_string()])].into(),
            ground_truth_linux: BTreeMap::new(),
            ground_truth_reasoning: String::new(),
            testcases: vec![Testcase {
                name: Some("PC1 pings PC2".into()),
                device: Some("PC1".into()),
                commands: vec!["ping 10.0.0.2 -c 2".into()],
                expected_output: Some("10.0.0.2 icmp_seq=\\d+ ttl=64".into()),
                expected_result: None,
                dialect: None,
            }],
        };
        Task {
            id: "two-hosts".into(),
            application: "netconf".into(),
            level: 1,
            label: "two hosts".into(),
            domain: None,
            seed: None,
            query: "PC1 and PC2 reach each other".into(),
            setup: json!({"gns3": {"nodes": {
                "PC1": {"template": "VPCS"},
                "PC2": {"node_type": "vpcs"},
                "SW1": {"template": "Ethernet switch"},
            }}}),
            kind: TaskKind::Config(config),
        }
    }

    #[tokio::test]
    async fn vpcs_hosts_on_a_switch_are_configured_and_ping() {
        let Some(url) = server_url("vpcs_hosts_on_a_switch_are_configured_and_ping") else { return };
        let factory = Gns3Factory::new(Gns3Options::new(&url));
        let task = two_hosts("ip 10.0.0.2/24\n");
        let mut env = factory.create(&task).await.expect("create");
        let brief = env.reset(&task).await.expect("reset");
        assert!(
            brief.contains("PC1 (vpcs, vpcs CLI)") && brief.contains("SW1 (ethernet_switch, no CLI)"),
            "{brief}"
        );
        let ours: Vec<String> =
            project_names(&url).await.into_iter().filter(|n| n.ends_with("-two-hosts")).collect();
        assert_eq!(ours.len(), 1, "{ours:?}");

        // Before: PC1 has no address, the testcase fails.
        let before = env.evaluate(&task, None).await.expect("evaluate");
        assert!(!before.solved(), "{before:?}");
        assert_eq!(before.export["configs"]["PC2"], "ip 10.0.0.2/24\n");
        // VPCS 0.5b2 dies pinging without an address: the driver does not send that ping.
        assert!(before.checks[0].detail.contains("not sent: this host has no IP address"), "{before:?}");

        let obs = env
            .execute(&ToolCall::new(
                "update-cfg",
                json!({"device": "PC1", "commands": ["ip 10.0.0.1/24", "bogus", "save /tmp/x"]}),
            ))
            .await
            .expect("update-cfg");
        let results = &obs.data.as_ref().expect("data")["results"];
        assert_eq!(results[0]["status"], "success");
        assert_eq!(results[1]["status"], "error");
        assert!(results[1]["error"].as_str().is_some_and(|e| e.contains("refused")), "{results}");
        assert!(results[2]["error"].as_str().is_some_and(|e| e.contains("refused")), "{results}");
        let running =
            env.execute(&ToolCall::new("get-running-cfg", json!({"device": "PC1"}))).await.expect("cfg");
        assert_eq!(running.content, "ip 10.0.0.1/24\n");
        let ping = env
            .execute(&ToolCall::new("execute-cmd", json!({"device": "PC1", "command": "ping 10.0.0.2 -c 1"})))
            .await
            .expect("ping");
        assert!(ping.content.contains("10.0.0.2 icmp_seq=1"), "{}", ping.content);
        let refused = env
            .execute(&ToolCall::new("execute-cmd", json!({"device": "PC1", "command": "ip 10.0.0.9/24"})))
            .await
            .expect("refused");
        assert!(!refused.ok && refused.content.contains("refused"), "{}", refused.content);
        let switch =
            env.execute(&ToolCall::new("get-running-cfg", json!({"device": "SW1"}))).await.expect("sw");
        assert!(!switch.ok && switch.content.contains("has no console"), "{}", switch.content);
        let topo =
            env.execute(&ToolCall::new("get-topology", json!({"devices": ["PC2"]}))).await.expect("topo");
        assert_eq!(topo.data.expect("data")["topology"]["links"], json!(["PC2 e0 <-> SW1 e1"]));

        let after = env.evaluate(&task, None).await.expect("evaluate");
        assert!(after.solved(), "{after:?}");
        assert_eq!(after.export["command_score"]["f1"], 1.0, "{}", after.export["command_score"]);
        env.close().await.expect("close");
        let left: Vec<String> =
            project_names(&url).await.into_iter().filter(|n| n.ends_with("-two-hosts")).collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn a_console_without_a_prompt_fails_the_reset_and_leaves_nothing() {
        let Some(url) = server_url("a_console_without_a_prompt_fails_the_reset_and_leaves_nothing") else {
            return;
        };
        let mut options = Gns3Options::new(&url);
        options.boot_timeout = Duration::from_secs(4);
        let factory = Gns3Factory::new(options);
        // `a@b> ` is not a prompt the VPCS dialect knows: the console never shows one.
        let mut task = two_hosts("set pcname a@b\n");
        task.id = "no-prompt".into();
        let mut env = factory.create(&task).await.expect("create");
        let err = env.reset(&task).await.expect_err("no prompt").to_string();
        assert!(
            err.contains("node `PC2`") && err.contains("no prompt after 4s") && err.contains("a@b>"),
            "{err}"
        );
        let left: Vec<String> =
            project_names(&url).await.into_iter().filter(|n| n.ends_with("-no-prompt")).collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn a_dropped_episode_deletes_its_project() {
        let Some(url) = server_url("a_dropped_episode_deletes_its_project") else { return };
        let factory = Gns3Factory::new(Gns3Options::new(&url));
        let mut task = two_hosts("ip 10.0.0.2/24\n");
        task.id = "dropped".into();
        let mut env = factory.create(&task).await.expect("create");
        env.reset(&task).await.expect("reset");
        assert_eq!(project_names(&url).await.iter().filter(|n| n.ends_with("-dropped")).count(), 1);
        drop(env);
        let left: Vec<String> =
            project_names(&url).await.into_iter().filter(|n| n.ends_with("-dropped")).collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn a_wrong_password_and_a_missing_server_say_so() {
        let Some(url) = server_url("a_wrong_password_and_a_missing_server_say_so") else { return };
        let mut options = Gns3Options::new(&url);
        options.credentials.password = "not-the-password".into();
        let task = two_hosts("");
        let err = Gns3Factory::new(options).create(&task).await.err().expect("refused").to_string();
        assert!(
            err.contains("authentication of user `admin` failed")
                && err.contains("Authentication was unsuccessful"),
            "{err}"
        );

        // A port nobody listens on: bind one, note it, close it.
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let down = format!("http://127.0.0.1:{port}");
        let err =
            Gns3Factory::new(Gns3Options::new(&down)).create(&task).await.err().expect("down").to_string();
        assert!(err.contains(&format!("GNS3 server {down} cannot be reached")), "{err}");
    }

    #[tokio::test]
    async fn the_vpcs_suite_parses_and_names_a_template_for_every_node() {
        let suite = StaticSuite::load(repo_root().join("testdata/gns3")).expect("testdata/gns3");
        let tasks: Vec<Task> = suite.tasks().map(|t| t.expect("task")).collect();
        assert!(tasks.len() >= 3, "{}", tasks.len());
        for t in &tasks {
            let TaskKind::Config(c) = &t.kind else { panic!("{} is not a configuration task", t.id) };
            for n in &c.topology.nodes {
                assert!(t.setup.pointer(&format!("/gns3/nodes/{n}")).is_some(), "{}: node {n}", t.id);
            }
        }
    }
}

// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, installed by
// .ci/mcp-typescript-sdk) as a client of netdojo-mcp, on stdio (the SDK spawns the server) or
// streamable HTTP: initialize, list the tools, run a show command, list and read a resource,
// subscribe to it, optionally commit a change (this client or an operator's) and wait for the
// resource's update, be refused twice (an unknown tool; a change, for a read-only client), and
// optionally end the episode with `done` before closing.
// Prints one JSON object for the Rust test (tests/mcp.rs, `typescript_sdk`) to check.
//
//   node ts_client.mjs NODE_MODULES CONFIG_JSON
//
// CONFIG_JSON: {"stdio": {"command", "args"}} or {"http": URL}; "tool_args" (merged into
// every tool call: {"device": "R1"} on a whole-network server), "resource" (the URI to read and
// subscribe to), "change" (absent: none; "self": this client configures and commits; a URL: an
// operator's client on that endpoint does), "refused" (true: a read-only client, which tries
// network.cli.configure), "done" (true: end the episode with `done` before closing).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, configJson] = process.argv.slice(2);
if (!nodeModules || !configJson) {
  console.error("usage: node ts_client.mjs NODE_MODULES CONFIG_JSON");
  process.exit(2);
}
const config = JSON.parse(configJson);

// The SDK lives outside the clone (a cache directory). NODE_PATH is not read by ES module
// resolution, which looks for node_modules only above the importing file, and
// createRequire(...).resolve() applies the package's `require` condition (its CommonJS build,
// a second copy of the SDK). So the `import` target of the SDK's `exports` map is resolved here
// and imported by absolute URL; the SDK's own imports (zod, ajv, ...) then resolve from its
// location in that node_modules, as usual. Works on node >= 18, unlike import.meta.resolve's
// parent argument or module.register hooks.
const sdkDir = join(nodeModules, "@modelcontextprotocol", "sdk");
const sdkPackage = JSON.parse(readFileSync(join(sdkDir, "package.json"), "utf8"));
async function sdk(subpath) {
  const exported = sdkPackage.exports[`./${subpath}`]?.import ?? sdkPackage.exports["./*"].import.replace("*", subpath);
  return import(pathToFileURL(join(sdkDir, exported)).href);
}
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { McpError, ResourceUpdatedNotificationSchema } = await sdk("types.js");

const toolArgs = config.tool_args ?? {};
const out = { sdk: sdkPackage.version };

/** A connected client; `wire` gets every message the server sent, as the SDK received it. */
async function connect(endpoint, name) {
  const transport = endpoint.stdio
    ? new StdioClientTransport({ ...endpoint.stdio, stderr: "pipe" })
    : new StreamableHTTPClientTransport(new URL(endpoint.http));
  const wire = [];
  // Protocol.connect chains the transport's onmessage set before it: the raw messages, before
  // the SDK's schemas drop what they do not know.
  transport.onmessage = (message) => wire.push(message);
  let stderr = "";
  transport.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name, version: "0" });
  await client.connect(transport);
  return { client, transport, wire, stderr: () => stderr };
}

/** The code of the McpError `promise` rejects with; null if it resolves. */
async function errorCode(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    if (e instanceof McpError) return e.code;
    throw e;
  }
}

async function until(what, seconds, done) {
  const deadline = Date.now() + seconds * 1000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${seconds} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const endpoint = config.stdio ? { stdio: config.stdio } : { http: config.http };
const main = await connect(endpoint, "netdojo-ts-interop");
const { client, transport, wire } = main;
let operator = null;
try {
  out.server_pid = transport.pid ?? null;
  const init = wire.find((m) => m.id !== undefined && m.result?.protocolVersion);
  out.protocol = init?.result.protocolVersion ?? null;
  out.wire_network = init?.result.capabilities?.network ?? null;
  const caps = client.getServerCapabilities();
  out.capabilities = caps;
  out.server = client.getServerVersion()?.name ?? null;

  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  out.tools = tools.map((t) => t.name);
  out.schemas = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));

  const exec = await client.callTool({ name: "network.cli.exec", arguments: { ...toolArgs, command: "show ip route" } });
  out.exec_is_error = exec.isError ?? false;
  out.exec_text = exec.content.filter((c) => c.type === "text").map((c) => c.text).join("");

  const resources = [];
  cursor = undefined;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    resources.push(...page.resources);
    cursor = page.nextCursor;
  } while (cursor);
  out.resources = resources.map((r) => r.uri);
  const read = await client.readResource({ uri: config.resource });
  out.read = read.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType ?? null, text: c.text ?? null }));

  const updated = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updated.push(n.params.uri);
  });
  out.subscribe = await client.subscribeResource({ uri: config.resource });
  out.subscribe_unknown_code = await errorCode(client.subscribeResource({ uri: "network:///nothing" }));

  if (config.change) {
    const by = config.change === "self" ? client : (operator = await connect({ http: config.change }, "netdojo-ts-operator")).client;
    const change = { ...toolArgs, commands: ["ip route 9.9.9.0/24 10.0.12.2"] };
    const staged = await by.callTool({ name: "network.cli.configure", arguments: change });
    const committed = await by.callTool({ name: "network.commit", arguments: toolArgs });
    out.commit = { staged: staged.structuredContent ?? null, committed: committed.structuredContent ?? null };
    await until(`notifications/resources/updated for ${config.resource}`, 10, () => updated.includes(config.resource));
  }
  out.updated = updated;

  out.unknown_tool_code = await errorCode(client.callTool({ name: "network.no.such.tool", arguments: {} }));
  if (config.refused) {
    const change = { ...toolArgs, commands: ["ip route 8.8.8.0/24 10.0.12.2"] };
    out.configure_refused_code = await errorCode(client.callTool({ name: "network.cli.configure", arguments: change }));
  }
  if (config.done) {
    const started = Date.now();
    const done = await client.callTool({ name: "done", arguments: {} });
    out.done = done.structuredContent ?? null;
    out.done_ms = Date.now() - started;
  }
} finally {
  if (config.done && out.done === undefined) {
    // A check above failed: still end the episode, so that close() does not kill the server
    // mid-episode (see the stdio test in tests/mcp.rs).
    await client.callTool({ name: "done", arguments: {} }).catch(() => {});
  }
  if (operator) {
    await operator.transport.terminateSession();
    await operator.client.close();
  }
  if (transport instanceof StreamableHTTPClientTransport) {
    // DELETE: the session ends now, not when the server's idle timer would end it.
    out.terminated = await transport.terminateSession().then(
      () => true,
      (e) => String(e),
    );
  }
  // stdio: close() ends the server's stdin, which ends its episode; it waits 2 s for the
  // process to exit, then sends SIGTERM, then after 2 s more SIGKILL.
  const started = Date.now();
  await client.close();
  out.close_ms = Date.now() - started;
  if (config.stdio) {
    // The server prints its summary ({"run_dir", "error", "record"}) as its last stderr line
    // when its episode ended and was recorded; a server killed by close() prints none.
    const last = main.stderr().trim().split("\n").pop();
    try {
      out.server_summary = JSON.parse(last);
    } catch {
      out.server_summary = null;
      out.server_stderr_tail = main.stderr().slice(-2000);
    }
  }
}
console.log(JSON.stringify(out));

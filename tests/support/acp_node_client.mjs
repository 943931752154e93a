// Drives `trio-agents acp` with the official Node ACP client (@agentclientprotocol/sdk,
// pinned to 0.25.1, the version the harness upstream pins): echo, a command the client allows
// when asked, then hold + cancel, then end of input. Exits 0 when every check holds; prints
// what failed otherwise.
// Usage: node acp_node_client.mjs <sdk dir> <cwd> <agent command> [args...]
import { check, startAgent } from "./acp_node_common.mjs";
import { Readable, Writable } from "node:stream";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, cwd, command, ...args] = process.argv.slice(2);
const sdk = await import(
  pathToFileURL(path.join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/acp.js")).href
);

const { agent, exited } = startAgent(command, args);
const texts = new Map();
const asked = [];
let onUpdate = () => {};
const client = {
  async sessionUpdate({ sessionId, update }) {
    if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
      texts.set(sessionId, (texts.get(sessionId) ?? "") + update.content.text);
    }
    onUpdate();
  },
  async requestPermission({ toolCall, options }) {
    asked.push(toolCall);
    const allow = options.find((option) => option.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  },
};
const stream = sdk.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const conn = new sdk.ClientSideConnection(() => client, stream);

const timer = setTimeout(() => check(false, "timed out after 30 s"), 30000);
const init = await conn.initialize({ protocolVersion: sdk.PROTOCOL_VERSION, clientCapabilities: {} });
check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
const { sessionId } = await conn.newSession({ cwd, mcpServers: [] });

const echo = await conn.prompt({ sessionId, prompt: [{ type: "text", text: "hello" }] });
check(echo.stopReason === "end_turn", `echo stopReason ${echo.stopReason}`);
check((texts.get(sessionId) ?? "").endsWith("echo: hello"), `echo text ${texts.get(sessionId)}`);

const made = path.join(cwd, "node-allowed");
const ran = await conn.prompt({ sessionId, prompt: [{ type: "text", text: `!touch ${made}` }] });
check(ran.stopReason === "end_turn", `command stopReason ${ran.stopReason}`);
check(asked.length === 1 && asked[0].kind === "execute", `asked ${JSON.stringify(asked)}`);
check(fs.existsSync(made), "the allowed command did not run");

const held = conn.prompt({ sessionId, prompt: [{ type: "text", text: "/hold" }] });
await new Promise((resolve) => {
  onUpdate = () => (texts.get(sessionId) ?? "").includes("holding") && resolve();
  onUpdate();
});
await conn.cancel({ sessionId });
const cancelled = await held;
check(cancelled.stopReason === "cancelled", `cancel stopReason ${cancelled.stopReason}`);

agent.stdin.end();
const code = await exited;
check(code === 0, `agent exit code ${code}`);
clearTimeout(timer);
console.log("PASS");

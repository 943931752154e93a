// Drives `trio-agents acp` with the official Node ACP client at 2.4.0 (its stable v1 app
// API, which parses every session/update it receives against the stable schema): the session
// methods ACP stabilised in 2026, D507. A prompt cancelled by aborting its request (the
// SDK sends `$/cancel_request`), `session/close`, then `session/resume` (no replay) and a
// prompt to the resumed session, message ids on the chunks (D509), and `session/delete`
// (D508). Exits 0 when every check holds; prints what failed.
// Usage: node acp_node_client_2026.mjs <sdk dir> <cwd> <agent command> [args...]
import { check, startAgent } from "./acp_node_common.mjs";
import { Readable, Writable } from "node:stream";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, cwd, command, ...args] = process.argv.slice(2);
const sdk = await import(
  pathToFileURL(path.join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js"))
    .href
);

const { agent, exited } = startAgent(command, args);
const updates = [];
let onUpdate = () => {};
const app = sdk
  .client({ name: "trio-agents-node-2026" })
  .onNotification("session/update", ({ params }) => {
    updates.push(params);
    onUpdate();
  });
const stream = sdk.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const timer = setTimeout(() => check(false, "timed out after 30 s"), 30000);
const texts = (sid, from = 0) =>
  updates
    .slice(from)
    .filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.content.text)
    .join("");

await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", {
    protocolVersion: 1,
    clientCapabilities: {},
  });
  const caps = init.agentCapabilities?.sessionCapabilities ?? {};
  check(caps.resume && caps.close && caps.delete, `sessionCapabilities ${JSON.stringify(caps)}`);
  const { sessionId } = await ctx.request("session/new", { cwd, mcpServers: [] });

  const echo = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "hello" }],
  });
  check(echo.stopReason === "end_turn", `echo stopReason ${echo.stopReason}`);

  // Aborting the request sends $/cancel_request for it.
  const abort = new AbortController();
  const held = ctx.request(
    "session/prompt",
    { sessionId, prompt: [{ type: "text", text: "/hold" }] },
    { cancellationSignal: abort.signal },
  );
  await new Promise((resolve) => {
    onUpdate = () => texts(sessionId).includes("holding") && resolve();
    onUpdate();
  });
  abort.abort();
  const cancelled = await held;
  check(cancelled.stopReason === "cancelled", `cancel stopReason ${cancelled.stopReason}`);

  const closed = await ctx.request("session/close", { sessionId });
  check(Object.keys(closed ?? {}).length === 0, `close answered ${JSON.stringify(closed)}`);

  const before = updates.length;
  await ctx.request("session/resume", { sessionId, cwd });
  const replayed = updates
    .slice(before)
    .filter((u) => u.update.sessionUpdate.endsWith("message_chunk"));
  check(replayed.length === 0, `resume replayed ${JSON.stringify(replayed)}`);
  const again = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "again" }],
  });
  check(again.stopReason === "end_turn", `resumed stopReason ${again.stopReason}`);
  check(texts(sessionId, before).endsWith("echo: again"), `resumed text ${texts(sessionId, before)}`);
  const ids = updates
    .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.messageId);
  check(
    ids.length > 0 && ids.every((id) => typeof id === "string" && id.startsWith("assistant-")),
    `message ids ${JSON.stringify(ids)}`,
  );

  const deleted = await ctx.request("session/delete", { sessionId });
  check(Object.keys(deleted ?? {}).length === 0, `delete answered ${JSON.stringify(deleted)}`);
  const listed = await ctx.request("session/list", {});
  check(
    !listed.sessions.some((info) => info.sessionId === sessionId),
    `listed after delete ${JSON.stringify(listed.sessions)}`,
  );
  const again2 = await ctx.request("session/delete", { sessionId });
  check(Object.keys(again2 ?? {}).length === 0, `second delete answered ${JSON.stringify(again2)}`);
});

agent.stdin.end();
const code = await exited;
check(code === 0, `agent exit code ${code}`);
clearTimeout(timer);
console.log("PASS");

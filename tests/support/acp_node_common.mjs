// What both Node ACP client drivers share: failing with a message, and the agent process.
import { spawn } from "node:child_process";

export function check(condition, message) {
  if (!condition) {
    console.error(`FAIL: ${message}`);
    process.exit(1);
  }
}

// The agent, its stdin and stdout piped, and a promise of its exit code.
export function startAgent(command, args) {
  const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));
  return { agent, exited };
}

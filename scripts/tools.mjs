// The platform's own binaries of the npm tools the relay's scripts and tests run: anvil and cast
// (@foundry-rs/<tool>-<os>-<arch>) and esbuild (@esbuild/<os>-<arch>), resolved through the
// packages themselves, so the same checkout works on Linux and macOS, x64 and arm64.
//   node scripts/tools.mjs          prints `export ANVIL_BIN=...` lines for a shell to eval
//   import { toolPaths } from "./scripts/tools.mjs"
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(ROOT, "package.json"));

/** The directory of an installed package, or undefined. */
function packageDir(name) {
  try {
    return path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    return undefined;
  }
}

/** Foundry's platform package names its binary by os and arch as foundry ships them. */
function foundry(tool) {
  const arch = { x64: "amd64", arm64: "arm64" }[process.arch];
  const dir = packageDir(`@foundry-rs/${tool}-${process.platform}-${arch}`);
  const exe = process.platform === "win32" ? `${tool}.exe` : tool;
  return dir && path.join(dir, "bin", exe);
}

/** esbuild's platform package, the binary its own wrapper would run. */
function esbuild() {
  const dir = packageDir(`@esbuild/${process.platform}-${process.arch}`);
  return dir && path.join(dir, "bin", process.platform === "win32" ? "esbuild.exe" : "esbuild");
}

/** Absolute paths of the tools for this platform (a tool not installed is left out). */
export function toolPaths() {
  const tools = { ANVIL_BIN: foundry("anvil"), CAST_BIN: foundry("cast"), ESBUILD_BIN: esbuild() };
  return Object.fromEntries(Object.entries(tools).filter(([, p]) => p && existsSync(p)));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  for (const [name, value] of Object.entries(toolPaths())) console.log(`export ${name}='${value}'`);
}

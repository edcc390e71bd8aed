// The "rewrite the selection as instructed…" code action: the server offers it as the command `waferline.rewrite`
// whose argument says which code, and the instruction is the user's. The client's executeCommand middleware asks
// for it (an input box) and adds it to the argument before the command goes to the server. No VS Code import here,
// so the rule is unit-tested with node --test.

export const REWRITE_COMMAND = 'waferline.rewrite';

/**
 * The command's arguments with the instruction in its first (object) argument: the one already there, or the one
 * `ask` returns. `undefined` when the user cancels or gives nothing (then nothing is sent).
 */
export async function withInstruction(
  args: unknown[],
  ask: () => Promise<string | undefined>,
): Promise<unknown[] | undefined> {
  const [first, ...rest] = args;
  if (typeof first !== 'object' || first === null || Array.isArray(first)) {
    return args; // not the shape the server offers: let the server answer it
  }
  const given = (first as Record<string, unknown>).instruction;
  if (typeof given === 'string' && given.trim() !== '') {
    return args;
  }
  const instruction = (await ask())?.trim();
  if (!instruction) {
    return undefined;
  }
  return [{ ...(first as Record<string, unknown>), instruction }, ...rest];
}

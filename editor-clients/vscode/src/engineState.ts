// What the status bar shows of the server's engine, from its `waferline/engineState` notification: ready, a remote
// engine down with the local model answering in its place (degraded), or nothing answering (down). Kept apart from
// the status bar so that it runs under Node's test runner without VS Code.

/** The notification's parameters (server/engine_state.py and server/app.py `engine_state`). */
export interface EngineState {
  state: string; // 'loading' | 'failed' | 'ready' | 'degraded' | 'down'
  problems?: Record<string, string>;
  engine?: string;
  chatEngine?: string;
}

/** The status bar's state and tooltip line for an engine state. */
export interface EngineStatus {
  state: 'starting' | 'ready' | 'degraded' | 'error';
  detail: string;
}

const PARTS: Record<string, string> = { completion: 'inline completions', chat: 'chat-style work' };

/** Reasons name the server and what failed, e.g. "http://127.0.0.1:8012/infill: cannot connect ...". */
function problemLines(problems: Record<string, string> | undefined): string {
  return Object.entries(problems ?? {})
    .map(([part, reason]) => `${PARTS[part] ?? part}: ${reason}`)
    .join('; ');
}

export function engineStatus(s: EngineState): EngineStatus {
  const problems = problemLines(s.problems);
  switch (s.state) {
    case 'loading':
      return { state: 'starting', detail: 'loading the model' };
    case 'ready':
      return { state: 'ready', detail: describeEngines(s) };
    case 'degraded':
      return { state: 'degraded', detail: `remote engine not answering, the local model answers — ${problems}` };
    case 'down':
      return { state: 'error', detail: `remote engine not answering — ${problems}` };
    default:
      return { state: 'error', detail: problems || `engine ${s.state}` };
  }
}

function describeEngines(s: EngineState): string {
  if (s.chatEngine && s.engine && s.chatEngine !== s.engine) {
    return `${s.engine}; chat-style work: ${s.chatEngine}`;
  }
  return s.engine ?? '';
}

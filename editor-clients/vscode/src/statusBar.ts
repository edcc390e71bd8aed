// The status bar item: server state (with the engine's: a remote engine down shows a warning, engineState.ts), and
// the last completion's latency (measured here, request -> answer) with
// the server's decode speed in tokens/s (from `waferline/stats`). Clicking it shows the statistics.
import * as vscode from 'vscode';

export type ServerState = 'starting' | 'ready' | 'degraded' | 'disabled' | 'stopped' | 'error';

const ICONS: Record<ServerState, string> = {
  starting: '$(loading~spin)',
  ready: '$(sparkle)',
  degraded: '$(warning)', // a remote engine down, the local model answering in its place
  disabled: '$(circle-slash)',
  stopped: '$(debug-stop)',
  error: '$(error)',
};

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = 'starting';
  private latencyMs: number | undefined;
  private tokensPerSecond: number | undefined;
  private detail = '';

  constructor() {
    this.item = vscode.window.createStatusBarItem('waferline.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'waferline';
    this.item.command = 'waferline.showStats';
    this.render();
    this.item.show();
  }

  setState(state: ServerState, detail = ''): void {
    this.state = state;
    this.detail = detail;
    this.render();
  }

  setFigures(latencyMs: number | undefined, tokensPerSecond: number | undefined): void {
    if (latencyMs !== undefined) {
      this.latencyMs = latencyMs;
    }
    if (tokensPerSecond !== undefined) {
      this.tokensPerSecond = tokensPerSecond;
    }
    this.render();
  }

  /** The text shown, e.g. "$(sparkle) waferline 23 ms · 410 tok/s". */
  text(): string {
    const parts = [`${ICONS[this.state]} waferline`];
    if ((this.state === 'ready' || this.state === 'degraded') && this.latencyMs !== undefined) {
      parts.push(`${Math.round(this.latencyMs)} ms`);
      if (this.tokensPerSecond !== undefined) {
        parts.push('·', `${Math.round(this.tokensPerSecond)} tok/s`);
      }
    }
    return parts.join(' ');
  }

  private render(): void {
    this.item.text = this.text();
    const lines = [`waferline: ${this.state}${this.detail ? ' — ' + this.detail : ''}`];
    if (this.latencyMs !== undefined) {
      lines.push(`last completion: ${this.latencyMs.toFixed(0)} ms`);
    }
    if (this.tokensPerSecond !== undefined) {
      lines.push(`decode speed: ${this.tokensPerSecond.toFixed(0)} tokens/s`);
    }
    lines.push('Click for statistics');
    this.item.tooltip = lines.join('\n');
    this.item.backgroundColor =
      this.state === 'error'
        ? new vscode.ThemeColor('statusBarItem.errorBackground')
        : this.state === 'degraded'
          ? new vscode.ThemeColor('statusBarItem.warningBackground')
          : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}

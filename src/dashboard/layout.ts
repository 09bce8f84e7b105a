import { UPLOT_CSS_PATH, UPLOT_JS_PATH } from './assets.js';
import { html, type SafeHtml } from './html.js';

export interface PageOptions {
  title: string;
  body: SafeHtml;
  /** Which top-menu entry is current. Default none. */
  nav?: 'runs' | 'imports' | 'plans' | 'workspaces' | 'queues';
  /** Reload the page every N seconds (while a run is in progress). Default: never. */
  refreshSeconds?: number;
  /** The session's form token, for the sign-out button; omit on pages without a session. */
  csrf?: string;
  /** Show the sign-out button. Default false. */
  canSignOut?: boolean;
  /** The page has activity charts: load uPlot, which dashboard.js draws them with. Default false. */
  charts?: boolean;
}

/** `data-refresh` 0: dashboard.js does not reload the page. */
const NO_REFRESH = 0;

export function page(options: PageOptions): string {
  const navLink = (key: PageOptions['nav'], href: string, label: string) =>
    html`<a href="${href}" class="${options.nav === key ? 'active' : ''}">${label}</a>`;
  const signOut =
    options.canSignOut && options.csrf !== undefined
      ? html`<form method="post" action="/logout"><input type="hidden" name="_csrf" value="${options.csrf}"><button type="submit">Sign out</button></form>`
      : '';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · crm-sync</title>
${options.charts === true ? html`<link rel="stylesheet" href="${UPLOT_CSS_PATH}">\n` : ''}<link rel="stylesheet" href="/static/dashboard.css">
${options.charts === true ? html`<script src="${UPLOT_JS_PATH}" defer></script>\n` : ''}<script src="/static/dashboard.js" defer></script>
</head>
<body data-refresh="${options.refreshSeconds ?? NO_REFRESH}">
<header class="top">
  <span class="brand">crm-sync</span>
  <nav>${navLink('runs', '/', 'Runs')}${navLink('plans', '/plans', 'Plans')}${navLink('imports', '/imports', 'Imports')}${navLink('workspaces', '/workspaces', 'Workspaces')}${navLink('queues', '/queues', 'Queues (raw)')}</nav>
  ${signOut}
</header>
<main>
${options.body}
</main>
</body>
</html>`.value;
}

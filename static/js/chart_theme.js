// The charts' colours, read from the page's CSS variables (static/css/app.css), so plotly follows the
// light / dark colour scheme the page follows (prefers-color-scheme).

export function chartTheme() {
  const css = getComputedStyle(document.documentElement);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  return {
    plotBg: v("--plot-bg", "#ffffff"),
    ink: v("--ink", "#1f2328"),
    muted: v("--muted", "#5f6368"),
    grid: v("--grid", "#e6e4dc"),
    line: v("--line", "#dcd9cf"),
    card: v("--card", "#ffffff"),
  };
}

// The loading dock's canvas colours (dock_painters/): the light ones are the defaults (a lane drawn without a
// theme, as in the painters' tests); the page's CSS variables --dock-* give the scheme in force.
export const DOCK_LIGHT = {
  bg: "#fbfaf6", road: "#ecebe4", cart: "#8d8a7e", cartDone: "#e2e0d8", ink: "#333333", muted: "#595959",
  bar: "#3c4048", truck: "#ffffff", cab: "#3c4048", door: "#f2a900", doorInk: "#7a5f00", bay: "#9a978c", box: "#6b6960",
};
const DOCK_VARS = { cartDone: "--dock-cart-done", doorInk: "--dock-door-ink" };

export function dockTheme() {
  const css = getComputedStyle(document.documentElement);
  return Object.fromEntries(Object.entries(DOCK_LIGHT).map(([key, fallback]) =>
    [key, css.getPropertyValue(DOCK_VARS[key] ?? `--dock-${key}`).trim() || fallback]));
}

// The layout keys that carry colours (merged into each chart's layout).
export function themedLayout(theme, layout) {
  const axis = (a) => ({ ...a, color: theme.ink, gridcolor: theme.grid, linecolor: theme.line, zerolinecolor: theme.grid });
  return {
    ...layout,
    font: { ...(layout.font ?? {}), color: theme.ink },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: theme.plotBg,
    xaxis: axis(layout.xaxis ?? {}),
    yaxis: axis(layout.yaxis ?? {}),
    legend: { ...(layout.legend ?? {}), font: { ...(layout.legend?.font ?? {}), color: theme.ink } },
    modebar: { bgcolor: "rgba(0,0,0,0)", color: theme.muted, activecolor: theme.ink },
    hoverlabel: { bgcolor: theme.card, bordercolor: theme.line, font: { color: theme.ink } },
  };
}

// Calls back when the system's colour scheme changes.
export function onSchemeChange(callback) {
  const query = window.matchMedia?.("(prefers-color-scheme: dark)");
  query?.addEventListener?.("change", () => callback());
}

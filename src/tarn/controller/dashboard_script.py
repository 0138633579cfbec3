"""The dashboard's script, served as /dashboard.js (the page's CSP allows scripts from the
controller only; nothing comes from a CDN). Every refresh it fetches /dashboard/data (charts)
and /dashboard (cards and tables) with the page's own query (its ?token= if it has one), and
swaps them in place: no full reload. Charts are plain SVG; each series' last value and each
scaling event are in data attributes, for people and tests to read. The load chart's dashed
thresholds are drawn only when the autoscaler scales on the load (``scale_on``); the page says in
words what it watches otherwise. A chart whose box the page
lacks is not drawn (the OpenAI fronts' charts, on a service without fronts)."""

DASHBOARD_JS = r"""
"use strict";
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var W = 560, H = 150, PAD = 34;
  var CHARTS = [
    {id: "instances", title: "Instances", unit: "", integer: true, series: [
      ["target", "#1a73e8"], ["ready", "#137333"], ["registered", "#b06000"]]},
    {id: "load", title: "Load (mean)", unit: "", series: [["load", "#1a73e8"]], thresholds: "load",
      thresholdsTitle: "Load (mean; scale-up and scale-down thresholds dashed)"},
    {id: "requests", title: "Requests per second (failures in red)", unit: "/s", series: [
      ["requests_per_s", "#1a73e8"], ["failures_per_s", "#a50e0e"]]},
    {id: "latency", title: "Latency: mean, slowest model's p99, queue (ms)", unit: "ms", scale: 1000,
      series: [["latency_s", "#1a73e8"], ["p99_s", "#a50e0e"], ["queue_s", "#b06000"]]},
    {id: "gpu", title: "GPU utilization (mean)", unit: "%", scale: 100, series: [
      ["gpu_utilization", "#137333"]]},
    {id: "tokens", title: "LLM tokens per second (OpenAI fronts, every user and model)", unit: "/s",
      series: [["prompt_tokens_per_s", "#b06000"], ["completion_tokens_per_s", "#1a73e8"]]},
    {id: "streams", title: "LLM streams in flight", unit: "", integer: true, series: [
      ["streams", "#1a73e8"]]},
    {id: "ttft", title: "Time to first token: the slowest model's p99 per tick (ms)", unit: "ms",
      scale: 1000, series: [["first_token_p99_s", "#a50e0e"]]}
  ];

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function fmt(v, chart) {
    if (v === null || v === undefined) { return "-"; }
    var x = v * (chart.scale || 1);
    return (chart.integer || Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2)) + chart.unit;
  }

  function clock(at) {
    return new Date(at * 1000).toLocaleTimeString();
  }

  function draw(chart, data) {
    var box = document.getElementById("chart-" + chart.id);
    if (!box) { return; }
    var points = data.points;
    // the thresholds are drawn only where they are the ones in force (scale_on: the chart's signal)
    var thresholds = chart.thresholds !== undefined && chart.thresholds === data.scale_on;
    var title = thresholds ? chart.thresholdsTitle : chart.title;
    var t0 = points.length ? points[0].at : 0, t1 = points.length ? points[points.length - 1].at : 1;
    var scale = chart.scale || 1, max = 0;
    chart.series.forEach(function (s) {
      points.forEach(function (p) { if (p[s[0]] !== null) { max = Math.max(max, p[s[0]] * scale); } });
    });
    if (thresholds) { max = Math.max(max, data.scale_up * 1.25); }
    if (chart.id === "instances") { max = Math.max(max, data.max_instances); }
    max = max || 1;
    var x = function (t) { return PAD + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - PAD - 6); };
    var y = function (v) { return H - 18 - (v / max) * (H - 30); };
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title,
      "data-chart": chart.id});
    el("line", {x1: PAD, y1: H - 18, x2: W - 6, y2: H - 18, stroke: "#d5d9e0"}, svg);
    el("text", {x: 2, y: 14, "font-size": 10, fill: "#5f6368"}, svg).textContent = fmt(max / scale, chart);
    el("text", {x: 2, y: H - 20, "font-size": 10, fill: "#5f6368"}, svg).textContent = "0";
    if (points.length) {  // the window's ends, in the viewer's local time
      el("text", {x: PAD, y: H - 4, "font-size": 10, fill: "#5f6368"}, svg).textContent = clock(t0);
      el("text", {x: W - 6, y: H - 4, "font-size": 10, fill: "#5f6368", "text-anchor": "end"}, svg)
        .textContent = clock(t1);
    }
    if (thresholds) {
      [["scale-up", data.scale_up], ["scale-down", data.scale_down]].forEach(function (th) {
        el("line", {x1: PAD, x2: W - 6, y1: y(th[1]), y2: y(th[1]), stroke: "#9aa0a6",
          "stroke-dasharray": "4 3", "data-threshold": th[0], "data-value": th[1]}, svg);
      });
    }
    data.events.forEach(function (e) {
      if (e.at < t0 || e.at > t1) { return; }
      var line = el("line", {x1: x(e.at), x2: x(e.at), y1: 4, y2: H - 18, "class": "event",
        stroke: e.direction === "up" ? "#1a73e8" : "#b06000", "stroke-dasharray": "2 2",
        "data-direction": e.direction, "data-from": e.target_from, "data-to": e.target_to}, svg);
      el("title", {}, line).textContent = e.direction + " " + e.target_from + " \u2192 " + e.target_to +
        ": " + e.reason;
    });
    var legend = [];
    chart.series.forEach(function (s) {
      var name = s[0], coords = [], last = null;
      points.forEach(function (p) {
        if (p[name] === null) { return; }
        coords.push(x(p.at).toFixed(1) + "," + y(p[name] * scale).toFixed(1));
        last = p[name];
      });
      el("polyline", {points: coords.join(" "), fill: "none", stroke: s[1], "stroke-width": 1.6,
        "data-series": name, "data-last": last === null ? "" : last}, svg);
      legend.push('<span style="color:' + s[1] + '">\u25a0 ' + name.replace(/_/g, " ") + " " +
        fmt(last, chart) + "</span>");
    });
    box.innerHTML = "<h3>" + title + "</h3><div class=legend>" + legend.join(" ") + "</div>";
    box.appendChild(svg);
  }

  function refresh() {
    var query = window.location.search;
    fetch("/dashboard/data" + query, {credentials: "same-origin"}).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (data) {
      if (!data) { return; }
      CHARTS.forEach(function (chart) { draw(chart, data); });
      document.getElementById("charts").setAttribute("data-points", data.points.length);
    });
    fetch("/dashboard" + query, {credentials: "same-origin"}).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (!html) { return; }
      var page = new DOMParser().parseFromString(html, "text/html");
      ["live-top", "live-tables"].forEach(function (id) {
        var fresh = page.getElementById(id);
        if (fresh) { document.getElementById(id).replaceWith(fresh); }
      });
    });
  }

  var every = Number(document.body.getAttribute("data-refresh") || "5") * 1000;
  refresh();
  window.setInterval(refresh, every);
})();
"""

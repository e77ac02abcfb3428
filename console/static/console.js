// tipkv console: the live tail of a stream (server-sent events), the
// overview's charts kept current, and a confirmation before a discard.
// Written for the console; no library, no build step.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  var prefix = document.body.dataset.prefix || "";

  // Live tail: each event the server sends becomes the newest row.
  var state = document.getElementById("tail-state");
  var table = document.getElementById("events");
  if (state && table && window.EventSource) {
    var es = new EventSource(state.dataset.tail);
    es.onopen = function () { state.textContent = "live tail: connected"; };
    es.onerror = function () { state.textContent = "live tail: reconnecting"; };
    es.addEventListener("event", function (m) {
      var e = JSON.parse(m.data);
      // The exact position is the event's id: positions are nanoseconds,
      // beyond the integers a JavaScript number holds exactly.
      var pos = m.lastEventId;
      var tr = document.createElement("tr");
      tr.id = "e" + pos;
      tr.className = "new";
      [pos, e.time.replace("T", " "), inline(e.value)].forEach(function (t, i) {
        var td = document.createElement("td");
        if (i === 0) { td.className = "n"; }
        if (i === 2) {
          var code = document.createElement("code");
          code.className = "clip";
          code.textContent = t;
          td.appendChild(code);
        } else {
          td.textContent = t;
        }
        tr.appendChild(td);
      });
      var head = table.rows[0];
      head.parentNode.insertBefore(tr, head.nextSibling);
      state.textContent = "live tail: " + pos;
    });
    es.addEventListener("error", function (m) {
      if (m.data) { state.textContent = "live tail ended: " + JSON.parse(m.data).error; es.close(); }
    });
  }

  // Charts: redraw from /api/samples every few seconds.
  var charts = document.getElementById("charts");
  if (charts) {
    var redraw = function () {
      fetch(prefix + "/api/samples", { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (s) {
          charts.querySelectorAll("figure.chart").forEach(function (f) {
            draw(f, s.samples || [], f.dataset.key);
          });
          setTimeout(redraw, Math.max(1000, (s.interval_ns || 5e9) / 1e6));
        })
        .catch(function () { setTimeout(redraw, 10000); });
    };
    setTimeout(redraw, 5000);
  }

  // A discard asks first.
  document.querySelectorAll("button[data-confirm]").forEach(function (b) {
    b.form.addEventListener("submit", function (ev) {
      if (!window.confirm(b.dataset.confirm)) { ev.preventDefault(); }
    });
  });
});

function inline(v) {
  var s = v.json !== undefined ? JSON.stringify(v.json) : (v.text || v.hex || "");
  return v.truncated ? s + " …" : s;
}

function draw(fig, samples, key) {
  var line = fig.querySelector("polyline");
  var last = fig.querySelector(".last");
  if (!samples.length) { return; }
  var hi = 0;
  samples.forEach(function (s) { hi = Math.max(hi, s[key] || 0); });
  var pts = samples.map(function (s, i) {
    var x = samples.length > 1 ? i * 240 / (samples.length - 1) : 240;
    var y = hi > 0 ? 48 - (s[key] || 0) / hi * 46 - 1 : 48;
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  line.setAttribute("points", pts.join(" "));
  var v = samples[samples.length - 1][key] || 0;
  if (key === "disk_usage" || key === "compaction_debt") {
    last.textContent = bytes(v);
  } else if (key === "cache_hit_rate") {
    last.textContent = (100 * v).toFixed(1) + "%";
  } else {
    last.textContent = v.toFixed(1);
  }
}

function bytes(n) {
  if (n < 1024) { return n + " B"; }
  var u = ["KiB", "MiB", "GiB", "TiB"], i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
  return n.toFixed(1) + " " + u[i];
}

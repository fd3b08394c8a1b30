// elicitd review page: progressive niceties only. The page works fully without this file.
// - a live countdown of the time left (counted from the server's figure, so a wrong device
//   clock does not matter);
// - multiple choices with a maximum: once the maximum is reached, the other boxes are disabled;
// - option tables: a click anywhere on a row picks it, and a row's details card opens while the
//   row is hovered or has the keyboard focus (without this file it is a "Details" disclosure).
(function () {
  'use strict';

  function pad(n) { return (n < 10 ? '0' : '') + n; }

  // Same format as the server: "2 d 3 h", "3 h 12 min", "4 min 05 s", "9 s".
  function remaining(ms) {
    var s = Math.ceil(Math.max(ms, 0) / 1000);
    var d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    s = s % 60;
    if (d > 0) return d + ' d ' + h + ' h';
    if (h > 0) return h + ' h ' + m + ' min';
    if (m > 0) return m + ' min ' + pad(s) + ' s';
    return s + ' s';
  }

  function countdown() {
    var el = document.getElementById('countdown');
    if (!el) return;
    var left = parseInt(el.getAttribute('data-remaining-ms'), 10);
    if (isNaN(left)) return;
    var end = Date.now() + left;
    function tick() {
      var ms = end - Date.now();
      if (ms <= 0) {
        el.textContent = 'none — this request has expired';
        el.parentNode.classList.add('over');
        return;
      }
      el.textContent = remaining(ms);
      setTimeout(tick, ((ms - 1) % 1000) + 1);
    }
    tick();
  }

  function limits() {
    var groups = document.querySelectorAll('fieldset[data-max]');
    Array.prototype.forEach.call(groups, function (fs) {
      var max = parseInt(fs.getAttribute('data-max'), 10);
      var boxes = fs.querySelectorAll('input[type=checkbox]');
      function update() {
        var n = 0;
        Array.prototype.forEach.call(boxes, function (b) { if (b.checked) n++; });
        Array.prototype.forEach.call(boxes, function (b) { b.disabled = !b.checked && n >= max; });
      }
      fs.addEventListener('change', update);
      update();
    });
  }

  // The card of the row under the pointer or holding the focus, shown in one floating box
  // (a copy of the row's "Details" content) that never takes clicks and never moves the
  // layout: opening or closing it cannot shift a button under a pending click. It stays
  // inside the options' fieldset, so it cannot cover the comment or the buttons.
  function cards(fs, rows) {
    var float = document.createElement('div');
    float.className = 'tpl-scope card-float';
    float.hidden = true;
    // Assistive technology reads the same content in the row's "Details" disclosure.
    float.setAttribute('aria-hidden', 'true');
    fs.appendChild(float);
    var current = null;
    function show(tr) {
      var body = tr.querySelector('.card-body');
      var details = tr.querySelector('details.card');
      if (!body || current === tr || (details && details.open)) return;
      current = tr;
      float.replaceChildren(body.cloneNode(true));
      float.hidden = false;
      // Below the row if it fits in the fieldset, else above it, else cut to the fieldset
      // (coordinates relative to where top: 0 puts it).
      float.style.top = '0px';
      float.style.maxHeight = '';
      var origin = float.getBoundingClientRect().top;
      var box = fs.getBoundingClientRect(), row = tr.getBoundingClientRect();
      var room = box.bottom - box.top, h = Math.min(float.offsetHeight, room);
      float.style.maxHeight = room + 'px';
      var top = row.bottom + h <= box.bottom ? row.bottom : Math.max(box.top, row.top - h);
      float.style.top = (top - origin) + 'px';
    }
    function hide(tr) {
      if (current !== tr) return;
      current = null;
      float.hidden = true;
      float.replaceChildren();
    }
    Array.prototype.forEach.call(rows, function (tr) {
      tr.addEventListener('mouseenter', function () { show(tr); });
      tr.addEventListener('mouseleave', function () { hide(tr); });
      tr.addEventListener('focusin', function () { show(tr); });
      tr.addEventListener('focusout', function () { hide(tr); });
      var details = tr.querySelector('details.card');
      if (details) details.addEventListener('toggle', function () { hide(tr); });
    });
  }

  function options() {
    var tables = document.querySelectorAll('fieldset.options-field');
    Array.prototype.forEach.call(tables, function (fs) {
      var rows = fs.querySelectorAll('tr.option');
      Array.prototype.forEach.call(rows, function (tr) {
        var input = tr.querySelector('.pick input');
        tr.addEventListener('click', function (e) {
          if (!input || input.disabled) return;
          var t = e.target;
          // The input, its label and the "Details" toggle do their own thing.
          if (t === input || (t.closest && (t.closest('label') || t.closest('summary')))) return;
          input.checked = input.type === 'radio' ? true : !input.checked;
          input.dispatchEvent(new Event('change', { bubbles: true }));
          input.focus();
        });
      });
      if (fs.querySelector('.card-body')) cards(fs, rows);
    });
  }

  countdown();
  limits();
  options();
})();

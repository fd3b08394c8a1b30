// elicitd review page: progressive niceties only. The page works fully without this file.
// - a live countdown of the time left (counted from the server's figure, so a wrong device
//   clock does not matter);
// - multiple choices with a maximum: once the maximum is reached, the other boxes are disabled.
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

  countdown();
  limits();
})();

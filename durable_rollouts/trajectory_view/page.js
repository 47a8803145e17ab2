(function () {
  var data = JSON.parse(document.getElementById("token-data").textContent);
  var tip = document.getElementById("tip");
  function mode(name) { document.body.className = "shade-" + name; }
  document.querySelectorAll("input[name=shade]").forEach(function (input) {
    input.addEventListener("change", function () { mode(input.value); });
    if (input.checked) { mode(input.value); }
  });
  function describe(span) {
    var part = span.parentElement;
    var reply = data.replies[+part.dataset.r];
    var k = +part.dataset.o + Array.prototype.indexOf.call(part.children, span);
    var lp = reply.lp[k], v = reply.v[k];
    return {
      id: reply.ids[k], text: JSON.stringify(span.textContent), logprob: lp,
      p: Math.exp(lp), version: v < 0 ? "none" : data.versions[v], mask: reply.m[k],
      position: reply.start + k, segment: reply.segment, turn: reply.turn
    };
  }
  window.tokenInfo = describe;
  document.addEventListener("mouseover", function (event) {
    var span = event.target;
    if (!span.parentElement || !span.parentElement.classList.contains("toks")) { tip.style.display = "none"; return; }
    var t = describe(span);
    var odds = t.logprob === null ? "not a number" : t.logprob.toFixed(4) + "  (p " + t.p.toFixed(3) + ")";
    tip.textContent = "id " + t.id + "  " + t.text + "\nlog-prob " + odds +
      "\nversion " + t.version + "  loss mask " + t.mask + "\nturn " + t.turn + "  segment " + t.segment + "  position " + t.position;
    tip.style.display = "block";
  });
  document.addEventListener("mousemove", function (event) {
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 440) + "px";
    tip.style.top = (event.clientY + 16) + "px";
  });
})();

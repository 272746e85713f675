const nbData = {
  state: JSON.parse(document.getElementById("nbagent-state").textContent),
  stop_requested: false,
  show_stop: false,
};
const nbListeners = new Map();
const nbModel = {
  get(key) { return nbData[key]; },
  set(key, value) {
    nbData[key] = value;
    for (const fn of [...(nbListeners.get(`change:${key}`) || [])]) fn();
  },
  on(name, fn) {
    if (!nbListeners.has(name)) nbListeners.set(name, new Set());
    nbListeners.get(name).add(fn);
  },
  off(name, fn) { if (nbListeners.has(name)) nbListeners.get(name).delete(fn); },
  save_changes() {},
};
const nbMount = document.getElementById("nbagent-root");
nbMount.replaceChildren();
window.nbagentModel = nbModel;
window.nbagentCleanup = nbTimeline.render({ model: nbModel, el: nbMount });

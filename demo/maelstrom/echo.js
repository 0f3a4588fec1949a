// Maelstrom's echo workload in JavaScript (Node.js, no packages): a loop over stdin
// lines, a handler per message type.
//
// --bug: the payload goes back as text (a number 7 comes back "7").
const readline = require('readline');

const bug = process.argv.includes('--bug');
let me = '';
const send = (dest, body) => process.stdout.write(JSON.stringify({src: me, dest, body}) + '\n');

const handlers = {
  init: (msg, reply) => { me = msg.body.node_id; reply({type: 'init_ok'}); },
  echo: (msg, reply) => reply({type: 'echo_ok', echo: bug ? String(msg.body.echo) : msg.body.echo}),
};

readline.createInterface({input: process.stdin}).on('line', (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  const reply = (body) => send(msg.src, {...body, in_reply_to: msg.body.msg_id});
  const handler = handlers[msg.body.type];
  if (handler) handler(msg, reply);
  else reply({type: 'error', code: 10, text: `no handler for ${msg.body.type}`});
});

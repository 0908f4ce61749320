// nginx (njs) body filter for the cluster's OpenAI routes. The replicas are reached over HTTP/1.0,
// so a stream is delimited by the connection's close: a replica that dies mid-stream looks to
// nginx like the end of the body. A stream that ends without "data: [DONE]" was cut short, and
// the client gets an SSE error event and [DONE] instead of a silent truncation.
function guard(r, data, flags) {
  if (!String(r.headersOut['Content-Type'] || '').startsWith('text/event-stream')) {
    r.sendBuffer(data, flags);
    return;
  }
  if (data.length) r.variables.sse_tail = (r.variables.sse_tail + data).slice(-32);
  if (!flags.last || r.variables.sse_tail.includes('data: [DONE]')) {
    r.sendBuffer(data, flags);
    return;
  }
  r.sendBuffer(data);
  // An event cut mid-line is closed by the blank line in front.
  r.sendBuffer(
      '\n\ndata: {"error":{"message":"the replica serving this stream stopped (' +
          r.variables.upstream_addr + '); retry the request",' +
          '"type":"server_error","code":"replica_lost"}}\n\ndata: [DONE]\n\n',
      {last: true});
}

export default {guard};

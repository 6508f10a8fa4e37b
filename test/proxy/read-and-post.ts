/** A chat completion offering the model two tools, `read_file` and `http_post` (the sequence tests). */
export const READ_AND_POST_REQUEST = {
  model: 'gpt-4o-mini',
  max_tokens: 5,
  messages: [{ role: 'user' as const, content: 'send the weekly report' }],
  tools: [
    { type: 'function' as const, function: { name: 'read_file', parameters: { type: 'object' } } },
    { type: 'function' as const, function: { name: 'http_post', parameters: { type: 'object' } } },
  ],
};

"""The ChatML-with-tools chat template this project ships with its offline Qwen3.6 tokenizer.

It follows the Qwen3-Coder conventions: tools listed as JSON inside ``<tools>``
in the system turn, tool calls as ``<tool_call><function=NAME><parameter=K>``
XML, consecutive tool results grouped into one user turn as
``<tool_response>`` blocks, and reasoning (``<think>``) kept only for assistant
turns after the last real user query: earlier reasoning is dropped, exactly the
behaviour that makes a naive prefix-reuse scheme drift.
"""

CHATML_TOOLS_TEMPLATE = r"""{%- set ns = namespace(last_query=-1, system='') -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- if messages and messages[0].role == 'system' -%}{%- set ns.system = messages[0].content -%}{%- endif -%}
{%- if tools -%}
  {{- '<|im_start|>system\n' -}}
  {%- if ns.system -%}{{- ns.system + '\n\n' -}}{%- endif -%}
  {{- '# Tools\n\nYou have access to the following functions:\n\n<tools>\n' -}}
  {%- for tool in tools -%}{{- tool | tojson -}}{{- '\n' -}}{%- endfor -%}
  {{- '</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call><|im_end|>\n' -}}
{%- elif ns.system -%}
  {{- '<|im_start|>system\n' + ns.system + '<|im_end|>\n' -}}
{%- endif -%}
{%- for m in messages -%}
  {%- if m.role == 'system' and loop.first -%}
  {%- elif m.role == 'user' or m.role == 'system' -%}
    {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}
  {%- elif m.role == 'assistant' -%}
    {{- '<|im_start|>assistant\n' -}}
    {%- if m.reasoning_content and loop.index0 > ns.last_query -%}
      {{- '<think>\n' + m.reasoning_content + '\n</think>\n\n' -}}
    {%- endif -%}
    {{- m.content or '' -}}
    {%- for tc in (m.tool_calls or []) -%}
      {%- if m.content or not loop.first -%}{{- '\n\n' -}}{%- endif -%}
      {{- '<tool_call>\n<function=' + tc.function.name + '>\n' -}}
      {%- for k, v in tc.function.arguments.items() -%}
        {{- '<parameter=' + k + '>\n' -}}
        {%- if v is string -%}{{- v -}}{%- else -%}{{- v | tojson -}}{%- endif -%}
        {{- '\n</parameter>\n' -}}
      {%- endfor -%}
      {{- '</function>\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\n' -}}
  {%- elif m.role == 'tool' -%}
    {%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\n<tool_response>\n' + m.content + '\n</tool_response>' -}}
    {%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""  # noqa: E501

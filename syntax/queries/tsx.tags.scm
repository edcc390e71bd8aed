; inherits: typescript
; Tag queries for TSX: TypeScript's, plus JSX components used as elements.

(jsx_opening_element name: (identifier) @reference.call)
(jsx_self_closing_element name: (identifier) @reference.call)

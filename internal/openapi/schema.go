package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// schema is the subset of JSON Schema 2020-12 this package writes. It is
// also what the TypeScript declarations are rendered from, so the two never
// disagree.
type schema struct {
	Ref         string   // a component name; nothing else is set
	Type        []string // "object", "string", ...
	Nullable    bool     // null is allowed too
	Description string   //
	Properties  []property
	Additional  *schema   // map values; nil: no other properties
	Open        bool      // other properties allowed (any value)
	Items       *schema   // array items
	Enum        []string  // string enums
	Const       any       // the one allowed value
	OneOf       []*schema //
	Discrim     string    // the property that tells the OneOf cases apart
	Any         bool      // any JSON value
	Minimum     *int64    //
	Format      string    //
}

type property struct {
	Name     string
	Schema   *schema
	Required bool
}

func ref(name string) *schema { return &schema{Ref: name} }

func str(desc string) *schema { return &schema{Type: []string{"string"}, Description: desc} }

func enum(desc string, values ...string) *schema {
	return &schema{Type: []string{"string"}, Enum: values, Description: desc}
}

func constant(v any) *schema {
	s := &schema{Const: v}
	switch v.(type) {
	case string:
		s.Type = []string{"string"}
	case int, int64:
		s.Type = []string{"integer"}
	}
	return s
}

func object(props ...property) *schema { return &schema{Type: []string{"object"}, Properties: props} }

func req(name string, s *schema) property { return property{Name: name, Schema: s, Required: true} }
func opt(name string, s *schema) property { return property{Name: name, Schema: s} }

func nullable(s *schema) *schema {
	c := *s
	c.Nullable = true
	return &c
}

func arrayOf(s *schema) *schema { return &schema{Type: []string{"array"}, Items: s} }

func mapOf(s *schema) *schema { return &schema{Type: []string{"object"}, Additional: s} }

// json writes the JSON Schema form; refs point into the components. One
// function, keyword after keyword, so that the output's order is the
// order read here.
func (s *schema) json() ([]byte, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	quote := func(v any) string {
		out, err := jsonMarshal(v)
		if err != nil {
			panic(err)
		}
		return string(out)
	}
	if s.Ref != "" {
		r := `{"$ref":` + quote("#/components/schemas/"+s.Ref) + `}`
		if s.Nullable {
			r = `{"oneOf":[` + r + `,{"type":"null"}]}`
		}
		return []byte(r), nil
	}
	if s.Any {
		if s.Description != "" {
			return []byte(`{"description":` + quote(s.Description) + `}`), nil
		}
		return []byte(`{}`), nil
	}
	var parts []string
	add := func(k string, v string) { parts = append(parts, quote(k)+":"+v) }
	if s.Description != "" {
		add("description", quote(s.Description))
	}
	types := slices.Clone(s.Type)
	if s.Nullable && len(types) > 0 && !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	switch {
	case len(s.OneOf) > 0:
		var subs []string
		for _, o := range s.OneOf {
			j, err := o.json()
			if err != nil {
				return nil, err
			}
			subs = append(subs, string(j))
		}
		if s.Nullable {
			subs = append(subs, `{"type":"null"}`)
		}
		add("oneOf", "["+strings.Join(subs, ",")+"]")
		if s.Discrim != "" {
			add("discriminator", `{"propertyName":`+quote(s.Discrim)+`}`)
		}
	case len(types) == 1:
		add("type", quote(types[0]))
	case len(types) > 1:
		add("type", quote(types))
	}
	if s.Const != nil {
		add("const", quote(s.Const))
	}
	if len(s.Enum) > 0 {
		vals := make([]any, 0, len(s.Enum)+1)
		for _, v := range s.Enum {
			vals = append(vals, v)
		}
		if s.Nullable {
			vals = append(vals, nil)
		}
		add("enum", quote(vals))
	}
	if s.Minimum != nil {
		add("minimum", quote(*s.Minimum))
	}
	if s.Format != "" {
		add("format", quote(s.Format))
	}
	if slices.Contains(s.Type, "object") {
		var props []string
		var required []string
		for _, p := range s.Properties {
			j, err := p.Schema.json()
			if err != nil {
				return nil, err
			}
			props = append(props, quote(p.Name)+":"+string(j))
			if p.Required {
				required = append(required, p.Name)
			}
		}
		if len(props) > 0 {
			add("properties", "{"+strings.Join(props, ",")+"}")
		}
		if len(required) > 0 {
			add("required", quote(required))
		}
		switch {
		case s.Additional != nil:
			j, err := s.Additional.json()
			if err != nil {
				return nil, err
			}
			add("additionalProperties", string(j))
		case !s.Open:
			add("additionalProperties", "false")
		}
	}
	if s.Items != nil {
		j, err := s.Items.json()
		if err != nil {
			return nil, err
		}
		add("items", string(j))
	}
	w("{%s}", strings.Join(parts, ","))
	return []byte(b.String()), nil
}

// reflector turns Go types into schemas: named struct types become
// components (referenced by name), fields follow their json tags —
// omitempty and omitzero fields are optional, the others required, and
// pointers without them nullable (nil is written as null). Types whose
// JSON is written by hand are mapped by overrides.
type reflector struct {
	components map[string]*schema
	overrides  map[reflect.Type]*schema
	names      map[reflect.Type]string
	// enums gives a field ("Type.Field") its allowed values.
	enums map[string][]string
}

func (r *reflector) schemaOf(t reflect.Type) *schema {
	if s, ok := r.overrides[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(r.schemaOf(t.Elem()))
	case reflect.String:
		return &schema{Type: []string{"string"}}
	case reflect.Bool:
		return &schema{Type: []string{"boolean"}}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &schema{Type: []string{"integer"}}
	case reflect.Float32, reflect.Float64:
		return &schema{Type: []string{"number"}}
	case reflect.Slice, reflect.Array:
		return arrayOf(r.schemaOf(t.Elem()))
	case reflect.Map:
		return mapOf(r.schemaOf(t.Elem()))
	case reflect.Interface:
		return &schema{Any: true}
	case reflect.Struct:
		name := r.names[t]
		if name == "" {
			name = t.Name()
		}
		if name == "" {
			return r.structSchema(t)
		}
		if _, ok := r.components[name]; !ok {
			r.components[name] = nil // break cycles
			r.components[name] = r.structSchema(t)
		}
		return ref(name)
	}
	panic(fmt.Sprintf("openapi: no schema for %v", t))
}

func (r *reflector) structSchema(t reflect.Type) *schema {
	s := object()
	r.addFields(s, t)
	return s
}

func (r *reflector) addFields(s *schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			r.addFields(s, f.Type) // embedded structs are inlined
			continue
		}
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		ft := f.Type
		var fs *schema
		if optional && ft.Kind() == reflect.Pointer {
			fs = r.schemaOf(ft.Elem()) // absent, never null
		} else {
			fs = r.schemaOf(ft)
		}
		if vals, ok := r.enums[t.Name()+"."+f.Name]; ok {
			c := *fs
			c.Enum = vals
			fs = &c
		}
		s.Properties = append(s.Properties, property{Name: name, Schema: fs, Required: !optional})
	}
}

// sortedNames lists the components by name.
func sortedNames(m map[string]*schema) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

package event

import (
	"reflect"
	"strings"
	"testing"
)

// TestParts_ReadTheirMember: each part names the member of Event it reads,
// an event carries exactly the parts whose members are set, and every
// pointer member of Event but Signed (allowed on any kind) is a part, so a
// new part cannot be left out of the kind table's checks.
func TestParts_ReadTheirMember(t *testing.T) {
	members := map[string]reflect.StructField{}
	for f := range reflect.TypeFor[Event]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		members[name] = f
	}
	named := map[string]bool{}
	for i, p := range parts {
		named[p.name] = true
		f, ok := members[p.name]
		if !ok {
			t.Errorf("part %q: Event has no member of that name", p.name)
			continue
		}
		var e Event
		v := reflect.ValueOf(&e).Elem().FieldByIndex(f.Index)
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.String:
			v.SetString("s")
		default:
			t.Errorf("part %q: member %s is a %s", p.name, f.Name, v.Kind())
			continue
		}
		if got := e.carriedParts(); got != 1<<i {
			t.Errorf("an event with only %s set carries the parts %b, want %b", f.Name, got, partSet(1)<<i)
		}
	}
	for name, f := range members {
		if f.Type.Kind() == reflect.Pointer && name != "signed" && !named[name] {
			t.Errorf("Event member %s (%q) is not a part", f.Name, name)
		}
	}
}
